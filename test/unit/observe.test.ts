import { describe, expect, it } from 'vitest';
import { LatencyHistogram } from '../../src/metrics/latency-histogram.js';
import { CommandLog, cutArgs } from '../../src/observe/command-log.js';
import { LatencyWindows } from '../../src/metrics/latency-windows.js';
import { mainThreadCpu, NodeSaturation } from '../../src/observe/node-saturation.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { RespoolConfig } from '../../src/config/types.js';
import type { Topology } from '../../src/cluster/topology.js';
import { seededRandom } from '../helpers/test-data.js';
import { sleep } from '../helpers/wait.js';

describe('LatencyHistogram', () => {
  it('percentiles are a bucket\'s highest value, within 12.5% of the exact one', () => {
    const rand = seededRandom(7);
    const h = new LatencyHistogram();
    const values: number[] = [];
    for (let i = 0; i < 20_000; i++) {
      const ms = Math.exp(rand() * 9 - 4); // 0.02 ms … 150 ms, log-uniform
      values.push(ms);
      h.recordMs(ms);
    }
    values.sort((a, b) => a - b);
    for (const p of [50, 90, 99, 99.9]) {
      const exact = values[Math.floor((p / 100) * values.length) - 1]! * 1000;
      const got = h.percentileUs(p);
      expect(got, `p${p}`).toBeGreaterThanOrEqual(exact * 0.99);
      expect(got, `p${p}`).toBeLessThanOrEqual(exact * 1.125);
    }
    expect(h.count).toBe(20_000);
  });

  it('valkeyCdf counts what lies below each of Valkey\'s points (1, 2, 4, … 33, 66 µs), listing only where it grows', () => {
    const h = new LatencyHistogram();
    for (const us of [0.5, 0.9, 1.5, 3, 3, 20, 40, 40, 40]) h.recordMs(us / 1000);
    expect(h.valkeyCdf()).toEqual([[1, 2], [2, 3], [4, 5], [33, 6], [66, 9]]);
    expect(new LatencyHistogram().valkeyCdf()).toEqual([]);
    const long = new LatencyHistogram();
    long.recordMs(3_600_000); // an hour: the last bucket
    expect(long.valkeyCdf().at(-1)![1]).toBe(1);
  });
});

describe('CommandLog', () => {
  it('cuts arguments as Valkey: 32 at most (the last counts the rest), 128 bytes each', () => {
    const many = Array.from({ length: 40 }, (_, i) => Buffer.from(String(i)));
    const cut = cutArgs(many);
    expect(cut).toHaveLength(32);
    expect(cut[31]!.toString()).toBe('... (9 more arguments)');
    expect(cutArgs([Buffer.from('x'.repeat(130))])[0]!.toString()).toBe(`${'x'.repeat(128)}... (2 more bytes)`);
  });

  it('keeps the newest maxLen entries, ids never reused; a negative threshold or maxLen 0 logs nothing', () => {
    const log = new CommandLog();
    const entry = () => ({ time: 0, value: 0, args: [], client: '', clientName: '', node: '', nodeUs: 0 });
    for (let i = 0; i < 5; i++) log.offer(10, 10, 3, entry);
    log.offer(9, 10, 3, entry); // below the threshold
    expect(log.length).toBe(3);
    expect(log.newest(-1).map((e) => e.id)).toEqual([4, 3, 2]);
    log.reset();
    log.offer(10, 10, 3, entry);
    expect(log.newest(1)[0]!.id).toBe(5);
    log.offer(10, -1, 3, entry);
    log.offer(10, 0, 0, entry);
    expect(log.length).toBe(1);
  });
});

describe('NodeSaturation', () => {
  const topology = { allNodes: () => [{ address: 'n1:1', host: 'n1', port: 1, role: 'primary' }, { address: 'n2:2', host: 'n2', port: 2, role: 'primary' }] } as unknown as Topology;
  const config = { ...structuredClone(DEFAULT_CONFIG), saturation: { p99Ms: 10, cpuPercent: 90, cpuSampleMs: 0 } } as RespoolConfig;

  it('reads the main thread\'s CPU from INFO cpu', () => {
    expect(mainThreadCpu('# CPU\r\nused_cpu_sys:1.5\r\nused_cpu_user:2.0\r\nused_cpu_sys_main_thread:1.25\r\nused_cpu_user_main_thread:1.75\r\n')).toBe(3);
    expect(mainThreadCpu('used_cpu_sys:1.5\r\nused_cpu_user:2.5\r\n')).toBe(4);
    expect(mainThreadCpu('nothing')).toBeNull();
  });

  it('a node whose main thread used more than cpuPercent of a core between two samples is saturated; BUSY counts as 100%', async () => {
    const windows = new LatencyWindows();
    let cpu = 0;
    let busy = false;
    const saturation = new NodeSaturation({
      config, topology: () => topology, windows,
      infoCpu: async ({ host }) => {
        if (host === 'n2' && busy) throw new Error('BUSY Valkey is busy running a script.');
        return `used_cpu_sys_main_thread:0\r\nused_cpu_user_main_thread:${host === 'n1' ? cpu : 0}\r\n`;
      },
    });
    await saturation.sampleCpu();
    // 97% of the time that really passed (a timer late on a busy machine must not lower the ratio);
    // 200 ms so that a stall between the clock readings here and the sampler's costs little.
    const t0 = performance.now();
    await sleep(200);
    cpu += (0.97 * (performance.now() - t0)) / 1000;
    await saturation.sampleCpu();
    const n1 = saturation.states().find((s) => s.node === 'n1:1')!;
    expect(n1.cpu!).toBeGreaterThan(0.85);
    expect(n1.saturated).toBe(n1.cpu! > 0.9);
    expect(saturation.states().find((s) => s.node === 'n2:2')!.saturated).toBe(false);
    busy = true;
    await saturation.sampleCpu();
    expect(saturation.states().find((s) => s.node === 'n2:2')!.reasons).toEqual(['busy']);
    expect(saturation.ratio()).toBeGreaterThanOrEqual(0.5);
  });

  it('a node whose upstream p99 over the last minute is above p99Ms is saturated, once it has enough requests', () => {
    const windows = new LatencyWindows();
    const saturation = new NodeSaturation({ config, topology: () => topology, windows, infoCpu: async () => '' });
    for (let i = 0; i < 10; i++) windows.node('n1:1').recordMs(50);
    expect(saturation.isSaturated('n1:1')).toBe(false); // too few requests to say
    for (let i = 0; i < 90; i++) windows.node('n1:1').recordMs(0.2);
    expect(saturation.states().find((s) => s.node === 'n1:1')!.reasons).toEqual(['p99']);
    expect(saturation.ratio()).toBe(0.5);
    for (let i = 0; i < 6; i++) windows.rotate(); // a minute later the slow requests are gone
    expect(saturation.isSaturated('n1:1')).toBe(false);
  });
});
