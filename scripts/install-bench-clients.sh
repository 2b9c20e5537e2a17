#!/usr/bin/env bash
# Clients the benches drive besides Node's: PHP with phpredis (bench/conn-per-request-tls.mjs runs
# PHP processes that connect per request, as PHP applications do). They are among the test
# clients install-valkey.sh installs (Debian packages; needs root).
set -euo pipefail
exec bash "$(dirname "$0")/install-valkey.sh" --with-test-clients
