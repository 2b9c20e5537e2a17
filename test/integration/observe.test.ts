import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { Valkey } from 'iovalkey';
import { startCluster, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { encodeCommand, RawClient, parseInfo } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { sleep, waitFor } from '../helpers/wait.js';

// Slow requests and latency as respool's clients see them (issue 22), through respool in front of
// a 3+3 cluster: SLOWLOG / COMMANDLOG / LATENCY HISTOGRAM / INFO latencystats in Valkey's layouts
// (read with iovalkey's own parser, next to a node's own replies), RESPOOL SLOWLOG / LATENCY / NODE,
// and a node made slow turning its saturation flag on.
let cluster: ValkeyCluster;
let proxy: RespoolProxy;
let client: Valkey;

beforeAll(async () => {
  cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
  const seed = cluster.nodes[0]!;
  proxy = await startTestProxy([{ host: seed.host, port: seed.port }], {
    slowlog: { thresholdUs: 50_000, maxLen: 128 },
    saturation: { p99Ms: 20, cpuPercent: 90, cpuSampleMs: 200 },
    admin: { host: '127.0.0.1', port: 0 },
  });
  client = clientFor(proxy);
});

afterAll(async () => {
  client?.disconnect();
  await proxy?.close();
  await cluster?.stop();
});

/** A key whose slot `node` owns. */
async function keyOn(node: ValkeyNode, prefix: string): Promise<string> {
  for (let i = 0; ; i++) {
    const key = `${prefix}:${i}`;
    if ((await cluster.primaryForSlot(calculateSlot(key))).port === node.port) return key;
  }
}

/** The shape of a reply, for comparing layouts: types in place of values. */
function shape(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(shape);
  return typeof v;
}

/** iovalkey's reply to a RESPOOL SLOWLOG entry / RESPOOL LATENCY row, as an object. */
function fields(row: unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < row.length; i += 2) out[String(row[i])] = row[i + 1];
  return out;
}

describe('SLOWLOG: the requests that were slow at respool, and where they went', () => {
  it('a GET held up by DEBUG SLEEP on its node is logged with that node and the time spent there; a fast one is not', async () => {
    const [slowNode] = await cluster.primaries();
    const key = await keyOn(slowNode!, 'obs:slow');
    expect(await client.call('SLOWLOG', 'RESET')).toBe('OK');
    await client.set(key, 'v');
    const direct = await RawClient.connect(slowNode!.port);
    // A long sleep and a long head start: the node must already be asleep when the GET arrives,
    // and the GET still waits well over the threshold even if the sleep began late.
    const sleeping = direct.call('DEBUG', 'SLEEP', '1');
    await sleep(150);
    expect(await client.get(key)).toBe('v'); // waits behind the sleep
    await sleeping;
    direct.close();
    expect(await client.get(key)).toBe('v'); // fast
    // Only this key's GETs are judged: on a loaded machine the SET or SLOWLOG RESET may also be slow.
    const all = (await client.call('SLOWLOG', 'GET', '-1')) as unknown[][];
    const entries = all.filter((e) => JSON.stringify(e[3]) === JSON.stringify(['get', key]));
    expect(entries).toHaveLength(1); // the slow GET; the fast one is not logged
    const [id, time, duration, args, addr, name] = entries[0]! as [number, number, number, string[], string, string];
    expect(args).toEqual(['get', key]); // as the client sent it (iovalkey writes lower case)
    expect(duration).toBeGreaterThanOrEqual(500_000);
    expect(Math.abs(time - Date.now() / 1000)).toBeLessThan(5);
    expect(typeof id).toBe('number');
    expect(addr).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(name).toBe('');
    expect(await client.call('SLOWLOG', 'LEN')).toBe(all.length);
    // RESPOOL SLOWLOG: the node it went to, and how the time split
    const ours = ((await client.call('RESPOOL', 'SLOWLOG', 'GET', '-1')) as unknown[][]).map(fields).find((e) => e['id'] === id)!;
    expect(ours, 'the slow GET in RESPOOL SLOWLOG').toBeDefined();
    expect(ours['node']).toBe(`${slowNode!.host}:${slowNode!.port}`);
    expect(ours['node_us']).toBeGreaterThanOrEqual(500_000);
    expect(Number(ours['respool_us']) + Number(ours['node_us'])).toBe(duration);
    expect(ours['respool_us']).toBeLessThan(50_000);
    expect(ours['command']).toEqual(['get', key]);
  });

  it('replies have a node\'s own layout, read with iovalkey; counts and errors as Valkey\'s', async () => {
    const [node] = await cluster.primaries();
    const direct = new Valkey({ host: node!.host, port: node!.port, lazyConnect: false });
    try {
      await direct.config('SET', 'slowlog-log-slower-than', '0');
      await direct.call('SLOWLOG', 'RESET');
      await direct.call('CLIENT', 'SETNAME', 'obs');
      const directKey = await keyOn(node!, 'obs:direct');
      await direct.set(directKey, 'x'.repeat(200));
      // The node logs every client's commands, respool's topology refreshes among them: take this
      // client's SET, not merely the newest entry.
      const nodeEntries = (await direct.call('SLOWLOG', 'GET', '-1')) as unknown[][];
      const nodeEntry = nodeEntries.find((e) => e[5] === 'obs' && (e[3] as string[])[0]?.toLowerCase() === 'set')!;
      expect(nodeEntry, 'the SET in the node\'s SLOWLOG').toBeDefined();
      await direct.config('SET', 'slowlog-log-slower-than', '10000');
      await direct.call('SLOWLOG', 'RESET');
      // through respool these are respool's own settings (the node's stay as they are)
      expect(await client.config('SET', 'slowlog-log-slower-than', '0')).toBe('OK');
      expect(await client.config('SET', 'slowlog-max-len', '3')).toBe('OK');
      expect(await client.config('GET', 'slowlog-*')).toEqual(expect.arrayContaining(['slowlog-log-slower-than', '0', 'slowlog-max-len', '3']));
      expect(await direct.config('GET', 'slowlog-max-len')).toEqual(['slowlog-max-len', '128']);
      await expect(client.config('SET', 'slowlog-max-len', '-1')).rejects.toThrow("ERR CONFIG SET failed (possibly related to argument 'slowlog-max-len') - argument must be between 0 and 1000000 inclusive"); // respool's bound
      const parseError = await direct.config('SET', 'slowlog-log-slower-than', 'x').catch((e: Error) => e.message);
      await expect(client.config('SET', 'slowlog-log-slower-than', 'x')).rejects.toThrow(parseError);
      await client.call('CLIENT', 'SETNAME', 'obs');
      await client.set('obs:through', 'y'.repeat(200));
      const ours = ((await client.call('SLOWLOG', 'GET', '1')) as unknown[][])[0]!;
      expect(shape(ours)).toEqual(shape(nodeEntry));
      expect(ours[3]).toEqual(['set', 'obs:through', `${'y'.repeat(128)}... (72 more bytes)`]); // cut as Valkey cuts it
      expect(nodeEntry[3]).toEqual(['set', directKey, `${'x'.repeat(128)}... (72 more bytes)`]);
      expect(ours[5]).toBe('obs');
      for (let i = 0; i < 5; i++) await client.ping();
      expect(await client.call('SLOWLOG', 'LEN')).toBe(3); // slowlog.maxLen
      expect(((await client.call('SLOWLOG', 'GET', '-1')) as unknown[]).length).toBe(3);
      expect(((await client.call('SLOWLOG', 'GET', '0')) as unknown[]).length).toBe(0);
      for (const args of [['SLOWLOG', 'GET', '-2'], ['SLOWLOG', 'GET', 'x'], ['SLOWLOG', 'LEN', 'x'], ['SLOWLOG', 'HELP'], ['SLOWLOG', 'NOPE']]) {
        const a = await direct.call(args[0]!, ...args.slice(1)).catch((e: Error) => `ERR:${e.message}`);
        const b = await client.call(args[0]!, ...args.slice(1)).catch((e: Error) => `ERR:${e.message}`);
        expect(b, args.join(' ')).toEqual(a);
      }
    } finally {
      await client.config('SET', 'slowlog-log-slower-than', '50000');
      await client.config('SET', 'slowlog-max-len', '128');
      direct.disconnect();
    }
  });
});

describe('COMMANDLOG (Valkey 8.1): slow, large-request, large-reply with thresholds of their own', () => {
  it('a 2 MiB SET is a large request, its GET a large reply; small ones are neither; errors as Valkey 8.1', async () => {
    for (const type of ['slow', 'large-request', 'large-reply']) expect(await client.call('COMMANDLOG', 'RESET', type)).toBe('OK');
    const value = 'z'.repeat(2 * 1024 * 1024);
    await client.set('obs:big', value);
    expect(await client.get('obs:big')).toBe(value);
    await client.set('obs:small', 'v');
    await client.get('obs:small');
    const requests = (await client.call('COMMANDLOG', 'GET', '10', 'large-request')) as unknown[][];
    expect(requests).toHaveLength(1);
    expect(shape(requests[0])).toEqual(['number', 'number', 'number', ['string', 'string', 'string'], 'string', 'string']);
    expect(requests[0]![2]).toBe(encodeCommand(['set', 'obs:big', value]).length); // the request's bytes
    expect((requests[0]![3] as string[])[2]).toBe(`${'z'.repeat(128)}... (${value.length - 128} more bytes)`);
    const replies = (await client.call('COMMANDLOG', 'GET', '-1', 'large-reply')) as unknown[][];
    expect(replies).toHaveLength(1);
    expect(replies[0]![2]).toBe(value.length + 12); // $2097152\r\n … \r\n
    expect(replies[0]![3]).toEqual(['get', 'obs:big']);
    expect(await client.call('COMMANDLOG', 'LEN', 'large-reply')).toBe(1);
    const errors = await Promise.all([
      ['COMMANDLOG', 'GET', '1', 'huge'], ['COMMANDLOG', 'GET', '-2', 'slow'], ['COMMANDLOG', 'LEN'], ['COMMANDLOG', 'NOPE'],
    ].map((a) => client.call(a[0]!, ...a.slice(1)).catch((e: Error) => e.message)));
    expect(errors).toEqual([
      'ERR type should be one of the following: slow, large-request, large-reply',
      'ERR count should be greater than or equal to -1',
      "ERR wrong number of arguments for 'commandlog|len' command",
      "ERR unknown subcommand 'NOPE'. Try COMMANDLOG HELP.",
    ]);
    expect(((await client.call('COMMANDLOG', 'HELP')) as string[])[0]).toBe('COMMANDLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:');
  });
});

describe('LATENCY HISTOGRAM and INFO latencystats from respool\'s own per-command histograms', () => {
  it('counts every GET and SET made through respool, in a node\'s layout', async () => {
    const [node] = await cluster.primaries();
    const before = ((await client.call('LATENCY', 'HISTOGRAM', 'get')) as unknown[]);
    const calls0 = before.length === 0 ? 0 : Number((before[1] as unknown[])[1]);
    for (let i = 0; i < 50; i++) await client.get(`obs:h:${i}`);
    const ours = (await client.call('LATENCY', 'HISTOGRAM', 'get', 'nosuchcommand')) as unknown[];
    expect(ours[0]).toBe('get');
    const body = ours[1] as unknown[];
    expect(body[0]).toBe('calls');
    expect(body[1]).toBe(calls0 + 50);
    expect(body[2]).toBe('histogram_usec');
    const cdf = body[3] as number[];
    expect(cdf.length % 2).toBe(0);
    // Valkey's labels: hdr's highest equivalent value of 1024·2^k ns at 2 significant digits, in µs (1, 2, 4, 8, 16, 33, 66, …)
    const labels = Array.from({ length: 32 }, (_, k) => Math.floor((1024 * 2 ** k + 2 ** Math.max(0, 3 + k) - 1) / 1000));
    expect(labels.slice(0, 11)).toEqual([1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056]);
    for (let i = 0; i + 1 < cdf.length; i += 2) expect(labels).toContain(cdf[i]);
    for (let i = 3; i < cdf.length; i += 2) expect(cdf[i]!).toBeGreaterThan(cdf[i - 2]!);
    expect(cdf.at(-1)).toBe(calls0 + 50); // cumulative
    // a node's own reply has the same layout
    const layout = (reply: unknown[]) => {
      expect(typeof reply[0]).toBe('string');
      const [calls, n, usec, pairs] = reply[1] as [string, number, string, number[]];
      expect([calls, typeof n, usec]).toEqual(['calls', 'number', 'histogram_usec']);
      expect(pairs.length % 2).toBe(0);
      for (const x of pairs) expect(typeof x).toBe('number');
    };
    const direct = new Valkey({ host: node!.host, port: node!.port, lazyConnect: false });
    await direct.get(await keyOn(node!, 'obs:h:direct'));
    layout((await direct.call('LATENCY', 'HISTOGRAM', 'get')) as unknown[]);
    direct.disconnect();
    layout(ours);
    // a container names its subcommands
    await client.call('CLIENT', 'INFO');
    const sub = (await client.call('LATENCY', 'HISTOGRAM', 'client')) as unknown[];
    expect(sub.filter((_, i) => i % 2 === 0)).toContain('client|info');
    const info = parseInfo(String(await client.info('latencystats')));
    expect(info['latency_percentiles_usec_get']).toMatch(/^p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}$/);
    const nodeInfo = parseInfo(String(await cluster.call(node!, 'INFO', 'latencystats')));
    expect(Object.keys(nodeInfo).length).toBeGreaterThan(0);
    for (const v of Object.values(nodeInfo)) expect(v).toMatch(/^p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}$/);
    // CONFIG RESETSTAT starts them over, as on Valkey
    expect(await client.call('CONFIG', 'RESETSTAT')).toBe('OK');
    expect(await client.call('LATENCY', 'HISTOGRAM', 'get')).toEqual([]);
  });
});

describe('RESPOOL LATENCY, RESPOOL NODE, saturation', () => {
  it('RESPOOL LATENCY: p50/p99/p99.9 per node and per family over the last minute, and /metrics has them', async () => {
    for (let i = 0; i < 60; i++) await client.get(`obs:l:${i}`);
    const rows = ((await client.call('RESPOOL', 'LATENCY')) as unknown[][]).map(fields);
    const primaries = (await cluster.primaries()).map((n) => `${n.host}:${n.port}`);
    for (const p of primaries) {
      const row = rows.find((r) => r['scope'] === 'node' && r['name'] === p);
      expect(row, p).toBeDefined();
      expect(Number(row!['calls'])).toBeGreaterThan(0);
      expect(Number(row!['p99_us'])).toBeGreaterThanOrEqual(Number(row!['p50_us']));
    }
    const keyed = rows.find((r) => r['scope'] === 'family' && r['name'] === 'keyed')!;
    expect(Number(keyed['calls'])).toBeGreaterThanOrEqual(60);
    const text = await proxy.metrics.render();
    expect(text).toMatch(new RegExp(`respool_upstream_latency_last_minute_seconds\\{node="${primaries[0]!.replace(/\./g, '\\.')}",quantile="0.99"\\} [0-9.e-]+`));
    expect(text).toMatch(/respool_client_latency_last_minute_seconds\{family="keyed",quantile="0.5"\} [0-9.e-]+/);
  });

  it('RESPOOL NODE <address> SLOWLOG GET is that node\'s own log; other commands are refused', async () => {
    const [node] = await cluster.primaries();
    const address = `${node!.host}:${node!.port}`;
    await cluster.call(node!, 'SLOWLOG', 'RESET');
    await cluster.call(node!, 'CONFIG', 'SET', 'slowlog-log-slower-than', '0');
    await cluster.call(node!, 'ECHO', 'in the node\'s log');
    await cluster.call(node!, 'CONFIG', 'SET', 'slowlog-log-slower-than', '10000');
    const nodeLog = (await client.call('RESPOOL', 'NODE', address, 'SLOWLOG', 'GET')) as unknown[][];
    expect(nodeLog.map((e) => (e[3] as string[]).join(' '))).toContain("ECHO in the node's log");
    expect(await client.call('RESPOOL', 'NODE', address, 'SLOWLOG', 'LEN')).toBe(nodeLog.length);
    expect(String(await client.call('RESPOOL', 'NODE', address, 'INFO', 'server'))).toContain(`tcp_port:${node!.port}`);
    await expect(client.call('RESPOOL', 'NODE', address, 'SET', 'k', 'v')).rejects.toThrow(/RESPOOL NODE sends a node only its introspection commands/);
    await expect(client.call('RESPOOL', 'NODE', '10.9.9.9:1', 'PING')).rejects.toThrow(/no node 10\.9\.9\.9:1 in the topology/);
  });

  it('a node slowed by DEBUG SLEEP turns its saturation flag on (p99); one busy in a script does too (cpu); the ratio moves', async () => {
    // a proxy of its own: its last minute holds only this test's requests
    const seed = cluster.nodes[0]!;
    const fresh = await startTestProxy([{ host: seed.host, port: seed.port }], { saturation: { p99Ms: 20, cpuPercent: 90, cpuSampleMs: 200 } });
    const client = clientFor(fresh);
    try {
      await saturationFlags(fresh, client);
    } finally {
      client.disconnect();
      await fresh.close();
    }
  });
});

async function saturationFlags(proxy: RespoolProxy, client: Valkey): Promise<void> {
  {
    const [, busy, slow] = await cluster.primaries();
    const address = (n: ValkeyNode) => `${n.host}:${n.port}`;
    const saturated = async () => {
      const rows = ((await client.call('RESPOOL', 'LATENCY')) as unknown[][]).map(fields);
      return new Set(rows.filter((r) => r['scope'] === 'node' && r['saturated'] === 1).map((r) => String(r['name'])));
    };
    const ratio = async () => Number(/^respool_nodes_saturated_ratio (\S+)$/m.exec(await proxy.metrics.render())![1]);
    const before = await ratio();
    expect(await saturated()).not.toContain(address(slow!));
    // p99: every request to `slow` waits behind a 30 ms sleep
    const key = await keyOn(slow!, 'obs:sat');
    const sleeper = await RawClient.connect(slow!.port);
    for (let round = 0; round < 30; round++) {
      const sleeping = sleeper.call('DEBUG', 'SLEEP', '0.03');
      await Promise.all([client.get(key), client.get(key)]);
      await sleeping;
    }
    sleeper.close();
    expect(await saturated()).toContain(address(slow!));
    expect(await ratio()).toBeGreaterThanOrEqual(before + 1 / 6 - 1e-9);
    expect(await proxy.metrics.render()).toMatch(new RegExp(`respool_node_saturated\\{node="${address(slow!).replace(/\./g, '\\.')}"\\} 1`));
    // cpu: a script holds `busy`'s main thread (INFO cpu answers BUSY, or its CPU is near a core)
    const runner = await RawClient.connect(busy!.port, { timeoutMs: 20_000 });
    await runner.call('CONFIG', 'SET', 'busy-reply-threshold', '100');
    const script = runner.call('EVAL', 'local t = redis.call("TIME") local s = t[1] while true do local n = redis.call("TIME") if n[1] - s >= 2 then break end end return 1', '0');
    await waitFor(async () => (await saturated()).has(address(busy!)), 'the busy node to count as saturated', 5000, 50);
    expect(await ratio()).toBeGreaterThanOrEqual(before + 2 / 6 - 1e-9);
    expect(await script).toBe(1);
    await runner.call('CONFIG', 'SET', 'busy-reply-threshold', '5000');
    runner.close();
    await waitFor(async () => !(await saturated()).has(address(busy!)), 'the busy node to recover', 5000, 50);
  }
}

describe('the admin JSON behind the status page', () => {
  it('/latency, /saturation, /slowlog and /events answer what RESPOOL LATENCY and SLOWLOG say', async () => {
    const base = `http://127.0.0.1:${proxy.adminAddress!.port}`;
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`);
      expect(res.status, path).toBe(200);
      return (await res.json()) as Record<string, unknown>;
    };
    const latency = await get('/latency');
    const primaries = (await cluster.primaries()).map((n) => `${n.host}:${n.port}`);
    const nodes = latency['nodes'] as Array<{ name: string; calls: number; p99Us: number; saturated: boolean }>;
    for (const p of primaries) expect(nodes.map((n) => n.name)).toContain(p);
    expect((latency['families'] as Array<{ name: string }>).map((f) => f.name)).toContain('keyed');
    // Every node of the 3+3 cluster. After the test above made a node busy, the topology can lag a
    // refresh behind (one fresh-clone CI run read 5 nodes at once): waited for, bounded.
    let saturation = await get('/saturation');
    await waitFor(async () => ((saturation = await get('/saturation'))['nodes'] as unknown[]).length === 6, 'the 6 nodes on /saturation', 5000, 50);
    expect((saturation['nodes'] as unknown[]).length).toBe(6);
    expect(typeof saturation['ratio']).toBe('number');
    expect(await client.config('SET', 'slowlog-log-slower-than', '0')).toBe('OK');
    await client.ping();
    expect(await client.config('SET', 'slowlog-log-slower-than', '50000')).toBe('OK');
    const slow = await get('/slowlog?count=-1');
    expect(slow['length']).toBe(await client.call('SLOWLOG', 'LEN'));
    const first = (slow['entries'] as Array<Record<string, unknown>>)[0]!;
    expect(Object.keys(first)).toEqual(['id', 'time', 'durationUs', 'node', 'nodeUs', 'respoolUs', 'command', 'client', 'clientName']);
    expect(Array.isArray((await get('/events'))['events'])).toBe(true);
    expect((await fetch(`${base}/slowlog?count=x`)).status).toBe(400);
  });
});

describe('big keys from the hot-key sampler\'s sample', () => {
  it('a 1 MiB key read repeatedly tops RESPOOL BIGKEYS and /bigkeys; its name is a metric label only when turned on', async () => {
    const seed = cluster.nodes[0]!;
    const hotKeys = structuredClone(DEFAULT_CONFIG.hotKeys);
    hotKeys.detection.sampleRate = 0.25;
    const fresh = await startTestProxy([{ host: seed.host, port: seed.port }], { hotKeys, admin: { host: '127.0.0.1', port: 0 } });
    const c = clientFor(fresh);
    try {
      const big = 'b'.repeat(1024 * 1024);
      await c.set('obs:bigkey', big);
      for (let i = 0; i < 20; i++) await c.set(`obs:small:${i}`, 'x'.repeat(100 + i));
      for (let round = 0; round < 40; round++) {
        expect((await c.get('obs:bigkey'))!.length).toBe(big.length);
        for (let i = 0; i < 20; i++) await c.get(`obs:small:${i}`);
      }
      const rows = ((await c.call('RESPOOL', 'BIGKEYS', 'COUNT', '3')) as unknown[][]).map(fields);
      expect(rows.length).toBeGreaterThanOrEqual(2);
      expect(rows[0]!['key']).toBe('obs:bigkey');
      expect(rows[0]!['bytes']).toBe(big.length + 12); // $1048576\r\n … \r\n
      expect(rows[0]!['command']).toBe('get');
      const owner = await cluster.primaryForSlot(calculateSlot('obs:bigkey'));
      expect(rows[0]!['node']).toBe(`${owner.host}:${owner.port}`);
      expect(Number(rows[1]!['bytes'])).toBeLessThan(200);
      const json = (await (await fetch(`http://127.0.0.1:${fresh.adminAddress!.port}/bigkeys`)).json()) as { keys: Array<{ key: string; bytes: number }> };
      expect(json.keys[0]).toMatchObject({ key: 'obs:bigkey', bytes: big.length + 12 });
      const text = await fresh.metrics.render();
      expect(text).toContain(`respool_bigkeys_top_key_bytes{rank="1",key=""} ${big.length + 12}`);
      expect(text).not.toContain('obs:bigkey');
    } finally {
      c.disconnect();
      await fresh.close();
    }
    hotKeys.detection.keyNamesInMetrics = true;
    const named = await startTestProxy([{ host: seed.host, port: seed.port }], { hotKeys });
    const n = clientFor(named);
    try {
      for (let i = 0; i < 40; i++) await n.get('obs:bigkey');
      expect(await named.metrics.render()).toMatch(/respool_bigkeys_top_key_bytes\{rank="1",key="obs:bigkey"\} 1048588/);
    } finally {
      n.disconnect();
      await named.close();
    }
  });
});
