import type { Logger } from 'pino';
import type { Gauge } from 'prom-client';
import type { RespoolConfig } from '../config/types.js';
import type { ClusterNode, Topology } from '../cluster/topology.js';
import type { Metrics } from '../metrics/metrics.js';
import type { LatencyWindows } from '../metrics/latency-windows.js';

/** Fewer requests than this in a node's last minute say nothing about its p99. */
export const MIN_CALLS_FOR_P99 = 20;

/** One node's state, as /saturation, RESPOOL LATENCY and the status page show it. */
export interface NodeSaturationState {
  node: string;
  role: string;
  saturated: boolean;
  /** Why: 'p99' and/or 'cpu' (or 'busy': the node answered INFO cpu with BUSY), empty when not saturated. */
  reasons: string[];
  p99Us: number;
  calls: number;
  /** Main-thread CPU between the last two samples, 0..1 of a core; null before two samples. */
  cpu: number | null;
}

interface CpuSample {
  /** used_cpu_sys_main_thread + used_cpu_user_main_thread, seconds. */
  cpuSeconds: number;
  at: number;
}

/** `INFO cpu` → the main thread's CPU seconds (the single thread that saturates), or the BUSY reply. */
export function mainThreadCpu(text: string): number | null {
  const field = (name: string) => {
    const m = new RegExp(`^${name}:([0-9.]+)`, 'm').exec(text);
    return m === null ? null : Number(m[1]);
  };
  const sys = field('used_cpu_sys_main_thread') ?? field('used_cpu_sys');
  const user = field('used_cpu_user_main_thread') ?? field('used_cpu_user');
  return sys === null || user === null ? null : sys + user;
}

/**
 * Which upstream nodes are saturated. A cluster's average CPU stays low while a few of its nodes
 * sit at 100% (the seeds' 2,000-node analysis), so what to watch is the share of saturated nodes
 * and each node's p99, not averages. A node is saturated while
 *
 *   p99   its upstream latency p99 over the last minute (send → reply, latency-windows.ts) is above
 *         saturation.p99Ms, over at least MIN_CALLS_FOR_P99 requests, or
 *   cpu   its main thread used more than saturation.cpuPercent of a core between two INFO cpu
 *         samples, taken every saturation.cpuSampleMs on an open shared link to the node, else on a
 *         connection of its own (a BUSY reply — a script holding the thread — counts as 100%).
 *
 * Exported as respool_node_saturated{node}, respool_nodes_saturated_ratio and
 * respool_node_cpu_utilization{node}, computed at scrape time.
 */
export class NodeSaturation {
  private readonly cpu = new Map<string, { last: CpuSample | null; utilization: number | null; busy: boolean; asking: boolean }>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly deps: {
      config: RespoolConfig;
      topology: () => Topology | null;
      windows: LatencyWindows;
      /** INFO cpu (on an open shared link, else a connection of its own): the reply text, or an error (BUSY …). */
      infoCpu: (node: ClusterNode) => Promise<string>;
      metrics?: Metrics;
      log?: Logger;
    },
  ) {
    const m = deps.metrics;
    if (m !== undefined) {
      const collect = (gauge: Gauge<string>, fill: (g: Gauge<string>) => void) => {
        (gauge as unknown as { collect: () => void }).collect = () => {
          gauge.reset();
          fill(gauge);
        };
      };
      collect(m.raw.node_saturated as Gauge<string>, (g) => {
        for (const s of this.states()) g.labels(s.node).set(s.saturated ? 1 : 0);
      });
      collect(m.raw.nodes_saturated_ratio as Gauge<string>, (g) => g.set(this.ratio()));
      collect(m.raw.node_cpu_utilization as Gauge<string>, (g) => {
        for (const [node, c] of this.cpu) if (c.utilization !== null) g.labels(node).set(c.utilization);
      });
    }
  }

  start(): void {
    const every = this.deps.config.saturation.cpuSampleMs;
    if (every <= 0 || this.timer !== null) return;
    this.timer = setInterval(() => void this.sampleCpu(), every);
    this.timer.unref();
    void this.sampleCpu(); // the first of the two samples a utilization needs
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** One INFO cpu per node (at most one in flight per node: a node held by a script delays only its own); nodes that left are forgotten. */
  async sampleCpu(): Promise<void> {
    const nodes = this.deps.topology()?.allNodes() ?? [];
    const live = new Set(nodes.map((n) => n.address));
    for (const address of this.cpu.keys()) if (!live.has(address)) this.cpu.delete(address);
    await Promise.all(nodes.map(async (n) => {
      let state = this.cpu.get(n.address);
      if (state === undefined) this.cpu.set(n.address, (state = { last: null, utilization: null, busy: false, asking: false }));
      if (state.asking) return;
      state.asking = true;
      let text: string;
      try {
        text = await this.deps.infoCpu(n);
      } catch (err) {
        const busy = /^BUSY\b/.test((err as Error).message);
        state.busy = busy;
        if (busy) state.utilization = 1;
        state.last = null;
        return;
      } finally {
        state.asking = false;
      }
      state.busy = false;
      const cpuSeconds = mainThreadCpu(text);
      if (cpuSeconds === null) return;
      const at = performance.now();
      if (state.last !== null && at > state.last.at) {
        state.utilization = Math.max(0, (cpuSeconds - state.last.cpuSeconds) / ((at - state.last.at) / 1000));
      }
      state.last = { cpuSeconds, at };
    }));
  }

  isSaturated(address: string): boolean {
    return this.stateOf(address, '').saturated;
  }

  private stateOf(address: string, role: string): NodeSaturationState {
    const { p99Ms, cpuPercent } = this.deps.config.saturation;
    const window = this.deps.windows.nodeSummary(address);
    const calls = window?.calls ?? 0;
    const p99Us = window?.p99Us ?? 0;
    const c = this.cpu.get(address);
    const reasons: string[] = [];
    if (calls >= MIN_CALLS_FOR_P99 && p99Us > p99Ms * 1000) reasons.push('p99');
    if (c?.busy) reasons.push('busy');
    else if (c?.utilization != null && c.utilization * 100 > cpuPercent) reasons.push('cpu');
    return { node: address, role, saturated: reasons.length > 0, reasons, p99Us, calls, cpu: c?.utilization ?? null };
  }

  /** Every node of the topology. */
  states(): NodeSaturationState[] {
    return (this.deps.topology()?.allNodes() ?? []).map((n) => this.stateOf(n.address, n.role));
  }

  /** Saturated nodes / nodes (0 with no topology). */
  ratio(): number {
    const states = this.states();
    return states.length === 0 ? 0 : states.filter((s) => s.saturated).length / states.length;
  }
}
