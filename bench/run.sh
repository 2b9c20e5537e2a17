#!/usr/bin/env bash
# respool benchmarks: `npm run bench` (= bash bench/run.sh). Not tests: they measure and write
# bench/RESULTS.md (overwritten) plus raw JSON in bench/out/ (gitignored).
#
#   RESPOOL_BENCH_SKIP_RESPOOL=1  direct and twemproxy only (while respool is not ready)
#   BENCH_QUICK=1                 short smoke run
#   BENCH_SKIP_STRACE=1           no syscall counts (bench/throughput.mjs runs strace -c -p on the proxies)
#   more knobs: see the headers of bench/throughput.mjs and bench/conn-per-request.mjs
#
# Every server it starts is on 127.0.0.1 and a free port, and is stopped at the end; processes
# left behind by a killed run are killed by pid (recorded in bench/out/pids/) on exit.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT=bench/out
PIDS=$OUT/pids
CMDS=$OUT/commands.txt
mkdir -p "$OUT" "$PIDS"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
skip_respool=0
case "${RESPOOL_BENCH_SKIP_RESPOOL:-}" in 1|true|yes) skip_respool=1 ;; esac

# Kill processes recorded in $PIDS whose command line still matches what was recorded (so a
# reused pid is never hit), then drop the records.
reap() {
  local f pid want have
  for f in "$PIDS"/*; do
    [[ -e "$f" ]] || continue
    pid=$(basename "$f")
    want=$(head -n1 "$f")
    if [[ -r /proc/$pid/cmdline ]]; then
      have=$(tr '\0' ' ' </proc/"$pid"/cmdline)
      if [[ -n "$want" && "$have" == "$want"* ]]; then
        echo "bench: killing leftover pid $pid ($want)" >&2
        kill -9 "$pid" 2>/dev/null || true
      fi
    fi
    rm -f "$f"
  done
}
trap reap EXIT
trap 'exit 130' INT TERM HUP
reap
rm -rf "$OUT/tmp"

: >"$CMDS"
cut -d' ' -f1-3 /proc/loadavg >"$OUT/loadavg-start.txt" 2>/dev/null || true
rm -f "$OUT"/throughput.md "$OUT"/throughput.json "$OUT"/conn-per-request.md "$OUT"/conn-per-request.json

# Run a step, echoing it and recording it for RESULTS.md.
step() {
  echo "+ $*" >&2
  printf '%s\n' "$*" >>"$CMDS"
  "$@"
}

status=0
step bash scripts/install-valkey.sh --with-twemproxy || { echo "bench: installing prerequisites failed" >&2; exit 1; }
if [[ ! -d node_modules ]]; then
  step npm ci || { echo "bench: npm ci failed" >&2; exit 1; }
fi
# The benches' RESP client and Valkey processes come from the test harness (build/harness/).
step npm run build:harness || { echo "bench: npm run build:harness failed" >&2; exit 1; }
if ! command -v strace >/dev/null && [[ "${BENCH_SKIP_STRACE:-}" != 1 ]]; then
  echo "bench: strace is not installed, so the syscall counts are skipped (BENCH_SKIP_STRACE=1)" >&2
  export BENCH_SKIP_STRACE=1
fi
if ! step npm run build; then
  if [[ $skip_respool == 1 ]]; then
    echo "bench: npm run build failed; continuing because RESPOOL_BENCH_SKIP_RESPOOL=1" >&2
    printf '%s\n' "# (npm run build failed; respool is skipped in this run)" >>"$CMDS"
  else
    echo "bench: npm run build failed (set RESPOOL_BENCH_SKIP_RESPOOL=1 to bench direct and twemproxy only)" >&2
    exit 1
  fi
fi

knobs=$(env | grep -E '^(BENCH_|RESPOOL_BENCH_)' | sort | tr '\n' ' ')
[[ -n "$knobs" ]] && printf '%s\n' "# environment: $knobs" >>"$CMDS"
step node bench/throughput.mjs || status=1
step node bench/conn-per-request.mjs || status=1
node bench/lib/report.mjs "$started" "$CMDS" || status=1

reap
left=$(ls -A "$PIDS" 2>/dev/null | wc -l)
if [[ $left != 0 ]]; then echo "bench: $left process record(s) left in $PIDS" >&2; status=1; fi
if [[ $status != 0 ]]; then
  echo "bench: finished with errors (see above and bench/RESULTS.md)" >&2
else
  echo "bench: done, see bench/RESULTS.md" >&2
fi
exit $status
