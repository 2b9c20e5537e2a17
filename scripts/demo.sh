#!/usr/bin/env bash
# Starts a local 3-primary + 3-replica Valkey cluster and respool in front of it.
# Env: RESPOOL_DEMO_PORT (default 6380), RESPOOL_DEMO_ADMIN (default 127.0.0.1:9121).
# Extra arguments are passed to respool.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-valkey.sh
[ -d node_modules ] || npm ci
npm run build
npm run build:harness
exec node build/harness/demo-cluster.js "$@"
