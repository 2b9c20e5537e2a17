#!/bin/bash
# What counting a script's commands in its caller's tot-cmds costs (clients.scriptCommandCounts,
# src/scripts/command-count-probe.ts: two CLIENT INFO on the link around each script call).
#
#   bash bench/script-command-counts.sh        (after npm run build)
#
# One valkey-server (no persistence) and two respools in front of it on 127.0.0.1, one with
# RESPOOL_CLIENTS_SCRIPT_COMMAND_COUNTS=never and one with =always; valkey-benchmark -c 20 -P 1
# (PIPE to change) EVALSHA of a two-command script (INCR, GET), N calls (100,000) per run, the
# two respools in turn for ROUNDS (3) rounds. Per run: calls/s and p50 as valkey-benchmark
# reports them, and the CPU (utime+stime ticks, /proc/<pid>/stat) of that respool and of the
# server during it. Stops only the processes it started, by pid.
set -eu
cd "$(dirname "$0")/.."
N=${N:-100000}; PIPE=${PIPE:-1}; ROUNDS=${ROUNDS:-3}
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }
VP=$(free_port); PN=$(free_port); PA=$(free_port)
valkey-server --port "$VP" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >/dev/null 2>&1 & V=$!
sleep 0.5
RESPOOL_CLIENTS_SCRIPT_COMMAND_COUNTS=never node bin/respool.js --listen "127.0.0.1:$PN" --upstream "127.0.0.1:$VP" --mode standalone --log-level warn >/dev/null 2>&1 & RN=$!
RESPOOL_CLIENTS_SCRIPT_COMMAND_COUNTS=always node bin/respool.js --listen "127.0.0.1:$PA" --upstream "127.0.0.1:$VP" --mode standalone --log-level warn >/dev/null 2>&1 & RA=$!
trap 'kill $RN $RA $V 2>/dev/null || true' EXIT
sleep 1.5
SHA=$(valkey-cli -p "$VP" SCRIPT LOAD "redis.call('incr', KEYS[1]); return redis.call('get', KEYS[1])")
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
echo "EVALSHA (INCR + GET), valkey-benchmark -c 20 -P $PIPE -n $N; respool and server CPU in 10 ms ticks"
for round in $(seq 1 "$ROUNDS"); do
  for setting in never always; do
    if [ "$setting" = never ]; then P=$PN; R=$RN; else P=$PA; R=$RA; fi
    r0=$(ticks $R); v0=$(ticks $V)
    out=$(valkey-benchmark -p "$P" -n "$N" -c 20 -P "$PIPE" -q EVALSHA "$SHA" 1 k 2>/dev/null | tr '\r' '\n' | grep -a 'requests per second' | tail -1 | sed 's/^.*: //')
    r1=$(ticks $R); v1=$(ticks $V)
    echo "round $round, scriptCommandCounts $setting: $out; respool $((r1 - r0)) ticks, server $((v1 - v0)) ticks"
  done
done
