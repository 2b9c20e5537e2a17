#!/usr/bin/env bash
# Runs Valkey 8.0.1's own tcl test suite through respool, in front of a throwaway 3-primary +
# 3-replica cluster on loopback.
#
#   scripts/valkey-suite.sh [unit ...]           run these units (default: every unit of run.sh)
#   scripts/valkey-suite.sh --check [unit ...]   and fail (exit 1) if a unit listed in
#                                                test/suite/expected.tsv gets fewer ok than its
#                                                min_ok after one rerun of that unit (its
#                                                failed tests are printed); without units,
#                                                runs the listed ones
#   scripts/valkey-suite.sh --isolated ...       the same in a network namespace of its own, so
#                                                several runs can go at once (root; see below)
#
# The suite itself is ../shared/valkey-suite/run.sh beside the repository (override with
# VALKEY_SUITE_DIR). UNIT_TIMEOUT (seconds, run.sh's default 600) bounds a hung unit.
# RESPOOL_SUITE_CONFIG: a respool config file for the run (say, colocation rules: the suite then
# checks the key-name rewriting in both directions); default none, as a new user runs respool.
# SUITE_EXPECTED: the unit/min_ok file --check reads (default test/suite/expected.tsv; the runs
# with a config have their own, beside it).
# The six valkey-server processes and respool run in a temp dir and are stopped at exit; only
# the PIDs started here are ever signalled. run.sh's logs go to ${TMPDIR:-/tmp}/valkey-suite-PORT/.
# --isolated: the run gets a loopback of its own (unshare -n) and a TMPDIR of its own (named on
# stderr), so its ports, the tcl runner's fixed 21079 and the lock below meet no other run's.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
suite_dir=${VALKEY_SUITE_DIR:-$root/../shared/valkey-suite}
expected=${SUITE_EXPECTED:-$root/test/suite/expected.tsv}

check=0
isolated=0
units=()
for a in "$@"; do
  case "$a" in
    --check) check=1 ;;
    --isolated) isolated=1 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "valkey-suite: unknown flag $a" >&2; exit 2 ;;
    *) units+=("$a") ;;
  esac
done

say() { echo "valkey-suite: $*" >&2; }

if [ $isolated = 1 ] && [ -z "${RESPOOL_SUITE_ISOLATED:-}" ]; then
  [ "$(id -u)" = 0 ] || { say "--isolated needs root (unshare -n)"; exit 2; }
  if ! command -v ip >/dev/null; then
    say "ip missing: installing Debian's iproute2"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends iproute2 >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq --no-install-recommends iproute2 >/dev/null; } ||
      { say "could not install iproute2"; exit 2; }
  fi
  private=$(mktemp -d "${TMPDIR:-/tmp}/respool-valkey-suite-run.XXXXXX")
  say "isolated run: loopback of its own, TMPDIR=$private"
  args=(); for a in "$@"; do [ "$a" = --isolated ] || args+=("$a"); done
  exec env RESPOOL_SUITE_ISOLATED=1 TMPDIR="$private" \
    unshare -n bash -c 'ip link set lo up && exec bash "$0" "$@"' "$0" ${args[@]+"${args[@]}"}
fi

# --- prerequisites ------------------------------------------------------------------------------
[ -x "$suite_dir/run.sh" ] || [ -f "$suite_dir/run.sh" ] || { say "no run.sh in $suite_dir"; exit 2; }
for b in valkey-server valkey-cli node; do
  command -v "$b" >/dev/null || { say "$b missing (npm run setup installs Valkey)"; exit 2; }
done
if ! command -v tclsh >/dev/null; then
  say "tclsh missing: installing Debian's tcl"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -qq --no-install-recommends tcl >/dev/null 2>&1 ||
    { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends tcl >/dev/null; } ||
    { say "could not install tcl"; exit 2; }
  command -v tclsh >/dev/null || { say "tcl installed but no tclsh on PATH"; exit 2; }
fi
if [ ! -f "$root/dist/respool.js" ]; then
  say "dist/ missing: npm run build"
  (cd "$root" && npm run build >/dev/null) || { say "build failed"; exit 2; }
fi

# expected.tsv: "unit<TAB>min_ok", '#' comments and a header line allowed
declare -A min_ok=()
if [ $check = 1 ]; then
  [ -f "$expected" ] || { say "no $expected"; exit 2; }
  listed=()
  while IFS=$'\t ' read -r u n _; do
    [[ -z "$u" || "$u" == \#* || "$u" == unit ]] && continue
    [[ "$n" =~ ^[0-9]+$ ]] || { say "bad min_ok for $u in $expected"; exit 2; }
    min_ok[$u]=$n; listed+=("$u")
  done <"$expected"
  [ ${#units[@]} -gt 0 ] || units=("${listed[@]}")
fi

# One run at a time per machine: the tcl runner's own test server always takes port 21079 (its
# free-port probe does not see a listener on 127.0.0.1), so two runs at once break each other.
# The lock's fd (9) is closed in the processes started below, so none of them outlives us holding it.
if command -v flock >/dev/null; then
  exec 9>"${TMPDIR:-/tmp}/respool-valkey-suite.lock"
  flock -n 9 || { say "another valkey-suite run holds ${TMPDIR:-/tmp}/respool-valkey-suite.lock; waiting"; flock 9; }
fi

# --- processes ----------------------------------------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/respool-valkey-suite.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do # gone, or a zombie of ours (reaped by wait below)
    for _ in $(seq 50); do [[ "$(ps -o stat= -p "$p" 2>/dev/null)" == Z* || -z "$(ps -o stat= -p "$p" 2>/dev/null)" ]] && break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null
  done
  if [ "${keep_work:-0}" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 143' INT TERM

# A free loopback port whose cluster bus port (+10000) is free too. Ports already handed out by
# this script are skipped; the server start below still retries if another process wins the race.
taken=" "
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((22000 + RANDOM % 23000)) # clear of the tcl runner's 21079 and of its bus-style +10000
    [[ "$taken" == *" $p "* || "$taken" == *" $((p + 10000)) "* ]] && continue
    if node -e '
      const net = require("net"); const ps = process.argv.slice(1).map(Number); let n = 0;
      const ss = ps.map((p) => net.createServer().once("error", () => process.exit(1))
        .listen(p, "127.0.0.1", () => { if (++n === ps.length) { ss.forEach((s) => s.close()); } }));
    ' "$p" "$((p + 10000))" 2>/dev/null; then
      echo "$p"; return 0
    fi
  done
  return 1
}

ping_ok() { [ "$(valkey-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]; }

start_valkey() { # sets vk_pid and vk_port
  local port d pid
  for _ in 1 2 3 4 5; do
    free_port >"$work/port" || return 1; port=$(<"$work/port"); taken+="$port $((port + 10000)) "
    d=$work/$port; mkdir -p "$d"
    valkey-server --bind 127.0.0.1 --port "$port" --dir "$d" --daemonize no \
      --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
      --cluster-require-full-coverage no --enable-debug-command no \
      --save "" --appendonly no --logfile "$d/valkey.log" >/dev/null 2>&1 9>&- &
    pid=$!
    for _ in $(seq 50); do ping_ok "$port" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if ping_ok "$port"; then vk_pid=$pid; vk_port=$port; return 0; fi
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  done
  return 1
}

ports=()
for _ in 1 2 3 4 5 6; do
  start_valkey || { say "could not start valkey-server"; exit 2; }
  pids+=("$vk_pid"); ports+=("$vk_port")
done
nodes=(); for p in "${ports[@]}"; do nodes+=("127.0.0.1:$p"); done
if ! valkey-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$work/create.log" 2>&1; then
  say "cluster create failed:"; cat "$work/create.log" >&2; exit 2
fi
for p in "${ports[@]}"; do
  ok=0
  for _ in $(seq 300); do
    if valkey-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' &&
       [ "$(valkey-cli -p "$p" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')" = 6 ]; then
      ok=1; break
    fi
    sleep 0.1
  done
  [ $ok = 1 ] || { say "node $p never reached cluster_state:ok"; exit 2; }
done
# a primary to point respool at
primary=""
for p in "${ports[@]}"; do
  valkey-cli -p "$p" role 2>/dev/null | head -1 | grep -q master && { primary=$p; break; }
done
[ -n "$primary" ] || { say "no primary found"; exit 2; }

rp_port=""
for _ in 1 2 3 4 5; do
  free_port >"$work/port" || break; rp_port=$(<"$work/port"); taken+="$rp_port "
  node "$root/bin/respool.js" ${RESPOOL_SUITE_CONFIG:+--config "$RESPOOL_SUITE_CONFIG"} --listen "127.0.0.1:$rp_port" --upstream "127.0.0.1:$primary" \
    --log-level warn >>"$work/respool.log" 2>&1 9>&- &
  rp_pid=$!
  for _ in $(seq 150); do ping_ok "$rp_port" && break; kill -0 "$rp_pid" 2>/dev/null || break; sleep 0.1; done
  if ping_ok "$rp_port"; then pids+=("$rp_pid"); break; fi
  kill "$rp_pid" 2>/dev/null; wait "$rp_pid" 2>/dev/null; rp_port=""
done
[ -n "$rp_port" ] || { say "respool did not answer PING:"; tail -20 "$work/respool.log" >&2; keep_work=1; exit 2; }
say "cluster ${ports[*]} (respool upstream $primary), respool on 127.0.0.1:$rp_port"

# --- the suite ----------------------------------------------------------------------------------
# run.sh once per unit; it prints the unit's line as it finishes, and the secs column is the
# time since the line before (the unit's own wall time). Between units, what a unit ended in
# mid-test leaves behind is undone, as run.sh itself kills a script left running: a CLIENT PAUSE
# (pause.tcl pauses writes for 6000 s and unpauses at the end of the test) and a maxmemory
# (tracking.tcl's eviction test) would fail the next units for the wrong reason.
start=$(date +%s); last=$start
declare -A got=()
# run.sh writes to a file, not a pipe: its per-unit watchdog (a `sleep UNIT_TIMEOUT`) outlives
# the unit and would hold a pipe open, so a reader waiting for EOF would wait UNIT_TIMEOUT.
# run.sh counts a unit that the tcl runner ended with [TIMEOUT] (one test hung for 60 s: the
# rest of the unit never ran) as neither err nor exception; such units are flagged here.
logs=${TMPDIR:-/tmp}/valkey-suite-$rp_port
: >"$work/suite.out" # made here, before the reader below opens it (the loop's own redirect may come after)
(
  child=""
  trap '[ -n "$child" ] && kill "$child" 2>/dev/null; exit 143' INT TERM # run.sh's own trap ends its unit
  for u in "${units[@]}"; do
    SUITE_OUT=$logs bash "$suite_dir/run.sh" "$rp_port" "$u" &
    child=$!; wait "$child"; child=""
    valkey-cli -h 127.0.0.1 -p "$rp_port" client unpause >/dev/null 2>&1
    valkey-cli -h 127.0.0.1 -p "$rp_port" config set maxmemory 0 >/dev/null 2>&1
  done
) >>"$work/suite.out" 2>&1 </dev/null 9>&- &
suite_pid=$!
pids=("$suite_pid" "${pids[@]}") # the loop first: it ends the run.sh it is waiting for
header=0; tok=0; terr=0; texc=0
while IFS= read -r line; do
  now=$(date +%s)
  read -r u ok err exc rest <<<"$line"
  if [[ "$u" == unit/* && "$ok" =~ ^[0-9]+$ && -z "$rest" ]]; then
    hung=$(grep -a -A1 '^\[TIMEOUT\]' "$logs/$(echo "$u" | tr / _).log" 2>/dev/null | sed -n 's/.*(IN PROGRESS) //p' | head -1)
    printf '%s %5ds%s\n' "$line" $((now - last)) "${hung:+  TIMEOUT in: $hung}"; got[$u]=$ok; last=$now
    tok=$((tok + ok)); terr=$((terr + err)); texc=$((texc + exc))
  elif [[ "$u" == unit && "$ok" == ok ]]; then
    [ $header = 1 ] || printf '%s %6s\n' "$line" secs; header=1
  elif [[ "$line" != "valkey suite: "* ]]; then # run.sh's total for its one unit: the run's is below
    echo "$line"
  fi
done < <(tail -n +1 -f --pid="$suite_pid" "$work/suite.out")
echo "valkey suite: $tok ok, $terr err, $texc exception (logs: $logs)"
echo "valkey-suite: $(( $(date +%s) - start ))s wall"

status=0
if ! kill -0 "$rp_pid" 2>/dev/null; then
  say "respool exited during the run:"; tail -40 "$work/respool.log" >&2; keep_work=1; status=1
elif [ -s "$work/respool.log" ]; then
  say "respool logged $(wc -l <"$work/respool.log") warning/error lines ($work/respool.log)"; keep_work=1
fi

if [ $check = 1 ]; then
  short=()
  for u in "${units[@]}"; do
    [ -n "${min_ok[$u]+x}" ] || continue
    have=${got[$u]:-0}
    [ "$have" -ge "${min_ok[$u]}" ] || short+=("$u: $have ok < min_ok ${min_ok[$u]}")
  done
  if [ ${#short[@]} -gt 0 ]; then
    say "below $(basename "$expected"):"; printf '  %s\n' "${short[@]}" >&2
    # What failed, named in the output (CI keeps no log files), and one rerun of each such unit
    # on the same cluster: a unit whose tests race the run's load (three suite runs share two
    # cores in CI) passes it, a unit respool broke fails both.
    still=()
    for entry in "${short[@]}"; do
      u=${entry%%:*}
      say "$u failed:"; grep -a -A2 -E '^\[(err|exception|TIMEOUT)\]' "$logs/$(echo "$u" | tr / _).log" 2>/dev/null | head -30 | sed 's/^/    /' >&2
      valkey-cli -h 127.0.0.1 -p "$rp_port" client unpause >/dev/null 2>&1
      SUITE_OUT=$logs/rerun bash "$suite_dir/run.sh" "$rp_port" "$u" >"$work/rerun.out" 2>&1 </dev/null
      again=$(awk -v u="$u" '$1 == u && $2 ~ /^[0-9]+$/ { print $2 }' "$work/rerun.out" | tail -1)
      say "$u rerun: ${again:-0} ok (min_ok ${min_ok[$u]})"
      [ "${again:-0}" -ge "${min_ok[$u]}" ] || still+=("$u")
    done
    say "logs: $logs/"
    if [ ${#still[@]} -gt 0 ]; then status=1; else say "every unit below its min_ok reached it when run again"; fi
  else
    say "every unit reached its min_ok in $(basename "$expected")"
  fi
fi
exit $status
