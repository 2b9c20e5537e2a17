// Event-loop delay probe for benchmarks, preloaded into a measured Node process (respool) with
//   node --import ./bench/lib/loop-delay-probe.mjs bin/respool.js …
// and enabled by RESPOOL_BENCH_LOOP_PROBE_DIR. It is not part of respool: a 1 ms timer costs an
// idle process ~1.6% of a core, too much to run in production; prom-client's own monitor (respool's
// nodejs_eventloop_lag_* metrics) samples every 10 ms, too coarse to see a few-ms stall.
//
// perf_hooks.monitorEventLoopDelay({ resolution: 1 }) records the time between the ticks of a 1 ms
// libuv timer: an idle loop reads ~1.05 ms, a loop turn that blocked for 20 ms reads ~20 ms.
// On each SIGUSR2 the probe writes what it recorded since the previous SIGUSR2 (or start) to
// <dir>/<pid>.<seq>.json as { pid, seq, count, mean, p50, p99, max } in ms, then resets.
// (cluster.fork passes execArgv on, so each respool worker loads the probe too.)
import fs from 'node:fs';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const dir = process.env.RESPOOL_BENCH_LOOP_PROBE_DIR;
if (dir) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  let seq = 0;
  process.on('SIGUSR2', () => {
    const ms = (ns) => (Number.isFinite(ns) ? ns / 1e6 : null);
    const out = {
      pid: process.pid, seq, count: h.count,
      mean: ms(h.mean), p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max),
    };
    const file = path.join(dir, `${process.pid}.${seq++}.json`);
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(out));
    fs.renameSync(`${file}.tmp`, file);
    h.reset();
  });
}
