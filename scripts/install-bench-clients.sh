#!/usr/bin/env bash
# Clients the benches drive besides Node's: PHP with phpredis (bench/conn-per-request-tls.mjs runs
# PHP processes that connect per request, as PHP applications do). Debian packages; needs root.
set -euo pipefail
if php -r 'exit(extension_loaded("redis") ? 0 : 1);' 2>/dev/null; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q php-cli php-redis >/dev/null
php -r 'echo "phpredis ", phpversion("redis"), "\n";'
