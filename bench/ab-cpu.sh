#!/usr/bin/env bash
# Interleaved A/B/C… of respool builds, and twemproxy, in front of one valkey-server at pipeline 1
# (or P): valkey-benchmark 50 clients, 100-byte values; per run requests/s, p99 and the CPU µs
# per request of the process under test (utime+stime from /proc ÷ requests). Order rotates each
# round; then medians and min–max per build and test.
#
#   bench/ab-cpu.sh DIR[@NODE_FLAGS] ...     each DIR a built respool checkout (bin/respool.js, dist/)
#   e.g. git worktree add /tmp/base <rev> && (cd /tmp/base && npm ci && npm run build)
#        ROUNDS=5 bench/ab-cpu.sh /tmp/base . ./@--min-semi-space-size=16
#   env: ROUNDS (5), N (100000), P (1), TESTS ("get set")
#
# Loopback only; ends only the processes it started (by PID).
set -u
N=${N:-100000}; P=${P:-1}; TESTS=${TESTS:-get set}
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
tmp=$(mktemp -d)
vport=$(free_port)
valkey-server --port "$vport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >/dev/null 2>&1 & pids=($!)
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT
ports=(); names=(); procs=()
for spec in "$@"; do
  dir=${spec%%@*}; flags=""; [[ $spec == *@* ]] && flags=${spec#*@}
  port=$(free_port)
  # shellcheck disable=SC2086
  node $flags "$dir/bin/respool.js" --listen "127.0.0.1:$port" --upstream "127.0.0.1:$vport" --log-level warn >/dev/null 2>&1 &
  pids+=($!); procs+=($!); ports+=("$port"); names+=("$(cd "$dir" && pwd)${flags:+ $flags}")
done
tport=$(free_port)
printf 'ab:\n  listen: 127.0.0.1:%s\n  redis: true\n  preconnect: true\n  server_connections: 2\n  auto_eject_hosts: false\n  hash: fnv1a_64\n  distribution: ketama\n  servers:\n    - 127.0.0.1:%s:1\n' "$tport" "$vport" >"$tmp/nutcracker.yml"
nutcracker -c "$tmp/nutcracker.yml" -o "$tmp/nutcracker.log" >/dev/null 2>&1 & pids+=($!); procs+=($!); ports+=("$tport"); names+=(twemproxy)
sleep 2.5
valkey-cli -p "$vport" set key:__rand_int__ "$(printf 'x%.0s' $(seq 100))" >/dev/null
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
n=${#ports[@]}
for t in $TESTS; do for j in $(seq 0 $((n-1))); do valkey-benchmark -p "${ports[$j]}" -c 50 -n 20000 -P "$P" -d 100 -t "$t" >/dev/null 2>&1; done; done
out=$tmp/runs.txt
for round in $(seq 1 "${ROUNDS:-5}"); do
  for k in $(seq 0 $((n-1))); do
    j=$(( (k + round) % n ))
    for t in $TESTS; do
      c0=$(cpu "${procs[$j]}")
      line=$(valkey-benchmark -p "${ports[$j]}" -c 50 -n "$N" -P "$P" -d 100 -t "$t" --csv 2>/dev/null | tail -1 | tr -d '"')
      c1=$(cpu "${procs[$j]}")
      us=$(echo "($c1-$c0)*(1000000/$(getconf CLK_TCK))/$N" | bc -l)
      echo "round $round | ${names[$j]} | $t | rps $(echo "$line" | cut -d, -f2) | p99 $(echo "$line" | cut -d, -f7) | cpu_us $us" | tee -a "$out"
    done
  done
done
echo
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => l.split(" | "));
const by = new Map();
for (const r of rows) { const k = r[1] + " | " + r[2].toUpperCase(); if (!by.has(k)) by.set(k, []); by.get(k).push(r.slice(3).map((x) => Number(x.split(" ")[1]))); }
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const f = (xs, d) => `${med(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})`;
console.log("| build | test | requests/s | p99 ms | CPU µs per request |\n| --- | --- | ---: | ---: | ---: |");
for (const [k, v] of by) console.log(`| ${k} | ${f(v.map((x) => x[0]), 0)} | ${f(v.map((x) => x[1]), 3)} | ${f(v.map((x) => x[2]), 1)} |`);
' "$out"
