#!/usr/bin/env bash
# Throughput of respool with 1 and with 2 workers (src/workers) in front of one valkey-server:
# valkey-benchmark GET/SET, 50 clients, 100-byte values, pipeline 1 and 16, ROUNDS interleaved
# rounds (default 3), then the median of each. Both respools run from this checkout (build first).
#
#   bash bench/workers.sh
#
# On a 2-core machine the load generator, valkey-server and the workers share the cores, so the
# figure says what a second process costs or gains here, not what it gains on a larger host.
# Ends only the processes it started (by PID). Loopback only.
set -u
rounds=${ROUNDS:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
vport=$(free_port); p1=$(free_port); p2=$(free_port)
valkey-server --port "$vport" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 & vpid=$!
sleep 0.5
node "$root/bin/respool.js" --workers 1 --listen "127.0.0.1:$p1" --upstream "127.0.0.1:$vport" --log-level warn >/dev/null 2>&1 & apid=$!
node "$root/bin/respool.js" --workers 2 --listen "127.0.0.1:$p2" --upstream "127.0.0.1:$vport" --log-level warn >/dev/null 2>&1 & bpid=$!
trap 'kill "$apid" "$bpid" 2>/dev/null; sleep 1; kill "$vpid" 2>/dev/null' EXIT
sleep 2
out=$(mktemp)
for round in $(seq 1 "$rounds"); do
  for w in 1 2; do
    port=$p1; [ "$w" = 2 ] && port=$p2
    for p in 1 16; do
      valkey-benchmark -p "$port" -c 50 -n 100000 -P "$p" -d 100 -t get,set --csv 2>/dev/null | tr -d '"' |
        awk -F, -v w="$w" -v p="$p" -v r="$round" 'NR>1{printf "%s workers=%s P%s %s %s\n", r, w, p, $1, $2}' | tee -a "$out"
    done
  done
done
echo "medians (requests/s):"
for p in 1 16; do
  for t in SET GET; do
    m1=$(awk -v p="P$p" -v t="$t" '$2=="workers=1" && $3==p && $4==t {print $5}' "$out" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
    m2=$(awk -v p="P$p" -v t="$t" '$2=="workers=2" && $3==p && $4==t {print $5}' "$out" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
    echo "P$p $t: 1 worker $m1, 2 workers $m2, ratio $(awk -v a="$m1" -v b="$m2" 'BEGIN{printf "%.2f", b/a}')"
  done
done
rm -f "$out"
