#!/usr/bin/env bash
# V8 heap bytes allocated per request by a respool build at pipeline 1 (or P): respool runs with
# --trace-gc-nvp, and the "allocated=" of every collection during a valkey-benchmark run of N
# requests (after a 20,000-request warm-up) is summed and divided by N. Also the number of
# collections and their pause total in that run.
#
#   bench/alloc-per-request.sh [DIR] [NODE_FLAGS...]     DIR: a built respool checkout (default .)
#   env: N (200000), P (1), T (get)
#
# Loopback only; ends only the processes it started (by PID).
set -u
dir=${1:-.}; shift || true
N=${N:-200000}; P=${P:-1}; T=${T:-get}
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
tmp=$(mktemp -d)
vport=$(free_port); rport=$(free_port)
valkey-server --port "$vport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >/dev/null 2>&1 & vpid=$!
sleep 0.3
node --trace-gc-nvp "$@" "$dir/bin/respool.js" --listen "127.0.0.1:$rport" --upstream "127.0.0.1:$vport" --log-level warn >"$tmp/gc.log" 2>&1 & rpid=$!
trap 'kill "$vpid" "$rpid" 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 2
valkey-cli -p "$vport" set key:__rand_int__ "$(printf 'x%.0s' $(seq 100))" >/dev/null
valkey-benchmark -p "$rport" -c 50 -n 20000 -P "$P" -d 100 -t "$T" >/dev/null 2>&1
l0=$(wc -l <"$tmp/gc.log")
valkey-benchmark -p "$rport" -c 50 -n "$N" -P "$P" -d 100 -t "$T" --csv 2>/dev/null | tail -1
l1=$(wc -l <"$tmp/gc.log")
sed -n "$((l0+1)),${l1}p" "$tmp/gc.log" | awk -v n="$N" '
  { for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == "allocated") s += a[2]; if (a[1] == "pause") { p += a[2]; if (a[2] > mx) mx = a[2] } } c++ }
  END { printf "collections %d, heap bytes allocated per request %.0f, pauses %.1f ms in all (longest %.1f ms)\n", c, s / n, p, mx }'
