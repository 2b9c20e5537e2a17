// What bench/soak.mjs charts over the hour, sampled every few seconds: each respool member's
// resident memory and open file descriptors (/proc/<pid>/status VmRSS, /proc/<pid>/fd; member A
// summed over its supervisor and workers), the cluster's client connections (CLIENT LIST,
// by name, summed over the running nodes, less the sampler's own — a frozen node counts
// with its last answer; only respool connects to the nodes, so these are respool's upstream
// connections), and each member's event-loop delay from its /metrics (prom-client's
// nodejs_eventloop_lag_p99_seconds / _max_seconds since the previous scrape, at prom-client's
// 10 ms resolution: an idle loop reads ~10-11 ms; the supervisor's /metrics averages the p99 over
// its workers and takes the max of the max). Each member's link gauges by node are kept too.
import fs from 'node:fs';
import { HOST, sleep } from './common.mjs';

/** VmRSS (bytes) and open descriptors of these processes, summed; NaN when none could be read. */
export function procStats(pids) {
  let rss = 0;
  let fds = 0;
  let seen = 0;
  for (const pid of pids) {
    try {
      const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      const n = fs.readdirSync(`/proc/${pid}/fd`).length;
      rss += Number(m?.[1] ?? 0) * 1024;
      fds += n;
      seen++;
    } catch {
      /* exited meanwhile */
    }
  }
  return seen ? { rss, fds } : { rss: NaN, fds: NaN };
}

/** Prometheus text → Map(name → sum of its series' values); `series`: Map(name{labels} → value) of the names asked for. */
export function parseMetrics(text, keepSeries = []) {
  const out = new Map();
  out.series = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    out.set(m[1], (out.get(m[1]) ?? 0) + Number(m[3]));
    if (keepSeries.includes(m[1]) && Number(m[3]) !== 0) out.series[`${m[1]}${m[2] ?? ''}`] = Number(m[3]);
  }
  return out;
}

async function scrape(adminPort) {
  try {
    const res = await fetch(`http://${HOST}:${adminPort}/metrics`, { signal: AbortSignal.timeout(3000) });
    return parseMetrics(await res.text(), ['respool_upstream_links', 'respool_leased_connections', 'respool_pubsub_upstream_connections', 'respool_park_watch_connections']);
  } catch {
    return Object.assign(new Map(), { series: {} });
  }
}

export class Sampler {
  /** `fleet`: soak-fleet.mjs's startFleet(); `cluster`: a SoakCluster; `t0`: the run's start (ms). */
  constructor({ fleet, cluster, t0, everyMs }) {
    this.fleet = fleet;
    this.cluster = cluster;
    this.t0 = t0;
    this.everyMs = everyMs;
    this.samples = [];
    this.lastByNode = {};
    this.running = false;
  }

  async sampleOnce() {
    const s = { t: (Date.now() - this.t0) / 1000, members: {} };
    const [census, ...metrics] = await Promise.all([
      this.cluster.clientCensus(),
      ...this.fleet.members.map((m) => scrape(m.adminPort)),
    ]);
    this.fleet.members.forEach((m, i) => {
      const { rss, fds } = procStats(m.pids());
      const mx = metrics[i];
      const get = (name) => (mx.has(name) ? mx.get(name) : NaN);
      s.members[m.name] = {
        pids: m.pids().length, rss, fds,
        lagP99Ms: get('nodejs_eventloop_lag_p99_seconds') * 1000,
        lagMaxMs: get('nodejs_eventloop_lag_max_seconds') * 1000,
        links: get('respool_upstream_links'),
        clients: get('respool_client_connections'),
        series: mx.series,
      };
    });
    const upstream = Object.fromEntries(Object.entries(census).map(([a, c]) => [a, c.total]));
    // A node that is running but did not answer (frozen, busy): its last count, not a dip to 0.
    s.carried = [];
    for (const n of this.cluster.nodes) {
      if (n.alive && !(n.address in upstream) && this.lastByNode[n.address] !== undefined) {
        upstream[n.address] = this.lastByNode[n.address];
        s.carried.push(n.address);
      }
    }
    this.lastByNode = upstream;
    s.upstreamConns = Object.values(upstream).reduce((a, b) => a + b, 0);
    s.upstreamByNode = upstream;
    s.namesByNode = Object.fromEntries(Object.entries(census).map(([a, c]) => [a, c.byName]));
    s.nodesAnswering = Object.keys(upstream).length;
    this.samples.push(s);
    return s;
  }

  start() {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        const started = Date.now();
        await this.sampleOnce().catch(() => undefined);
        await sleep(Math.max(0, this.everyMs - (Date.now() - started)));
      }
    })();
  }

  async stop() {
    this.running = false;
    await this.loop;
  }
}
