#!/usr/bin/env bash
# A/B throughput of two respool builds in front of one valkey-server: valkey-benchmark GET/SET,
# 50 clients, 100-byte values, pipeline 1 and 16, ROUNDS interleaved rounds (default 3).
#
#   bench/ab-respool.sh A_DIR B_DIR      each DIR a built respool checkout (bin/respool.js, dist/)
#   e.g. git worktree add /tmp/base <rev> && (cd /tmp/base && npm ci && npm run build)
#        bench/ab-respool.sh /tmp/base .
#
# Ends only the processes it started (by PID). Loopback only.
set -u
a=${1:?usage: ab-respool.sh A_DIR B_DIR}; b=${2:?usage: ab-respool.sh A_DIR B_DIR}
rounds=${ROUNDS:-3}
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
vport=$(free_port); aport=$(free_port); bport=$(free_port)
valkey-server --port "$vport" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & vpid=$!
sleep 0.5
node "$a/bin/respool.js" --listen "127.0.0.1:$aport" --upstream "127.0.0.1:$vport" --log-level warn >/dev/null 2>&1 & apid=$!
node "$b/bin/respool.js" --listen "127.0.0.1:$bport" --upstream "127.0.0.1:$vport" --log-level warn >/dev/null 2>&1 & bpid=$!
trap 'kill "$vpid" "$apid" "$bpid" 2>/dev/null' EXIT
sleep 1.5
for round in $(seq 1 "$rounds"); do
  for who in A B; do
    port=$aport; [ "$who" = B ] && port=$bport
    for p in 1 16; do
      out=$(valkey-benchmark -p "$port" -c 50 -n 100000 -P "$p" -d 100 -t get,set --csv 2>/dev/null | tr -d '"' | awk -F, 'NR>1{printf "%s=%s ", $1, $2}')
      echo "round $round $who P$p $out"
    done
  done
done
