// A measuring probe preloaded into respool by bench/throughput.mjs for its separate
// "instrumented respool" runs only (the respool compared with twemproxy runs without it):
//
//   RESPOOL_BENCH_PROBE_OUT=FILE node --import ./bench/lib/respool-probe.mjs bin/respool.js …
//
// It changes nothing in respool; it only watches the process it is loaded into. On each SIGUSR2
// it appends one JSON line to FILE covering the time since the previous line (or since start):
//
// - heap.allocatedBytes: bytes allocated on the V8 heap in the interval, from v8.GCProfiler: the
//   V8 heap only grows by allocation between collections, so allocation = Σ over the collections
//   in the interval of (used heap size before it − used heap size after the previous one), plus
//   the growth since the last collection (v8.getHeapStatistics().used_heap_size). Buffer/
//   ArrayBuffer backing stores live outside the V8 heap and are not counted (their JS objects
//   are); heap.externalDelta/arrayBuffersDelta show how those moved, which is not allocation.
// - gc: every entry of a PerformanceObserver on 'gc' (count, total and max pause ms, by kind),
//   and the collection types GCProfiler saw (a cross-check of the count); newSpaceBytes: the size
//   of V8's new space at those collections (it grows under allocation and shrinks when idle, so the
//   number of scavenges per request depends on what the process did before).
// - eventLoopDelay: perf_hooks.monitorEventLoopDelay at RESPOOL_BENCH_PROBE_ELD_MS (default 1)
//   ms resolution, reset at every line. Node records the interval between consecutive timer
//   callbacks, so a value is the resolution plus how late the timer fired; the bench subtracts
//   the resolution. Values in ns.
// - eventLoopUtilization: performance.eventLoopUtilization() over the interval (0–1).
// - cpu: process.cpuUsage() (µs) and process.resourceUsage() context switches, as deltas.
import fs from 'node:fs';
import v8 from 'node:v8';
import { PerformanceObserver, constants, monitorEventLoopDelay, performance } from 'node:perf_hooks';

const OUT = process.env.RESPOOL_BENCH_PROBE_OUT;
if (OUT) install(OUT);

function install(out) {
  const resolutionMs = Math.max(1, Number(process.env.RESPOOL_BENCH_PROBE_ELD_MS) || 1);
  const kindName = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
    [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
  };
  let gc = {};
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const k = kindName[e.detail?.kind ?? e.kind] ?? String(e.detail?.kind ?? e.kind);
      const g = (gc[k] ??= { count: 0, totalMs: 0, maxMs: 0 });
      g.count++;
      g.totalMs += e.duration;
      g.maxMs = Math.max(g.maxMs, e.duration);
    }
  });
  obs.observe({ entryTypes: ['gc'] });

  const eld = monitorEventLoopDelay({ resolution: resolutionMs });
  eld.enable();

  let profiler = new v8.GCProfiler();
  profiler.start();
  let lastUsed = v8.getHeapStatistics().used_heap_size;
  let lastMem = process.memoryUsage();
  let lastCpu = process.cpuUsage();
  let lastRes = process.resourceUsage();
  let lastT = process.hrtime.bigint();
  let lastElu = performance.eventLoopUtilization();
  let seq = 0;

  process.on('SIGUSR2', () => {
    const stats = profiler.stop().statistics;
    const used = v8.getHeapStatistics().used_heap_size;
    profiler = new v8.GCProfiler();
    profiler.start();
    const t = process.hrtime.bigint();
    let allocated = 0;
    let prev = lastUsed;
    const gcTypes = {};
    const newSpace = [];
    for (const s of stats) {
      const ns = s.beforeGC.heapSpaceStatistics.find((x) => x.spaceName === 'new_space');
      if (ns) newSpace.push(ns.spaceSize);
      allocated += s.beforeGC.heapStatistics.usedHeapSize - prev;
      prev = s.afterGC.heapStatistics.usedHeapSize;
      gcTypes[s.gcType] = (gcTypes[s.gcType] ?? 0) + 1;
    }
    allocated += used - prev;
    lastUsed = used;
    const mem = process.memoryUsage();
    const cpu = process.cpuUsage(lastCpu);
    const res = process.resourceUsage();
    const pct = (p) => eld.percentile(p);
    const line = {
      seq: ++seq,
      pid: process.pid,
      ms: Number(t - lastT) / 1e6,
      heap: {
        allocatedBytes: allocated,
        usedAfter: used,
        externalDelta: mem.external - lastMem.external,
        arrayBuffersDelta: mem.arrayBuffers - lastMem.arrayBuffers,
        gcProfilerTypes: gcTypes,
        newSpaceBytes: newSpace.length ? { min: Math.min(...newSpace), max: Math.max(...newSpace) } : null,
      },
      eventLoopUtilization: performance.eventLoopUtilization(lastElu).utilization,
      gc,
      eventLoopDelay: {
        resolutionMs,
        count: eld.count,
        minNs: eld.min, meanNs: eld.mean, maxNs: eld.max,
        p50Ns: pct(50), p90Ns: pct(90), p99Ns: pct(99), p999Ns: pct(99.9),
      },
      cpu: {
        userUs: cpu.user, systemUs: cpu.system,
        voluntaryCtxSwitches: res.voluntaryContextSwitches - lastRes.voluntaryContextSwitches,
        involuntaryCtxSwitches: res.involuntaryContextSwitches - lastRes.involuntaryContextSwitches,
      },
    };
    eld.reset();
    gc = {};
    lastMem = mem;
    lastCpu = process.cpuUsage();
    lastRes = res;
    lastT = t;
    lastElu = performance.eventLoopUtilization();
    fs.appendFileSync(out, JSON.stringify(line) + '\n');
  });
}
