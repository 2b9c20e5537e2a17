// Exactly what Valkey does (issue 28), respool with default settings in front of a standalone server
// and of a 3+3 cluster, side by side with one valkey-server over the same exchange (the oracle):
//  - MONITOR shows the commands a script or function runs ("[0 lua]" lines) after its own line;
//  - CLIENT PAUSE WRITE lets EVAL_RO, EVALSHA_RO, FCALL_RO and FCALL of a no-writes function run at
//    once and holds a script whose flags say nothing — each finishes, or is held, within a bound;
//  - a user made at run time with ACL SETUSER runs scripts as on Valkey (acl.upstream auto mirrors it);
//  - per-client command counts (CLIENT INFO tot-cmds) after sequences Valkey counts exactly, the
//    commands a script or function ran included (EVAL, EVALSHA, EVAL_RO, FCALL, FCALL_RO, a script
//    whose call fails, and an EVALSHA the node had to be given the script for again).
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawClient, encodeCommand } from '../harness/raw-client.js';
import { startTestProxy } from '../helpers/proxy.js';
import { startOracleTargets, type OracleTargets } from '../helpers/oracle-targets.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { connect } from '../helpers/transcript.js';
import { waitFor } from '../helpers/wait.js';

const LIBRARY = "#!lua name=exactlib\nredis.register_function{function_name='ro', callback=function(k) return redis.call('get', k[1]) end, flags={'no-writes'}}\nredis.register_function('rw', function(k) return redis.call('incr', k[1]) end)";
const SET_THEN_GET = "redis.call('set', KEYS[1], '1'); return redis.call('get', KEYS[1])";
const SET_THEN_GET_SHA = createHash('sha1').update(SET_THEN_GET).digest('hex');
const GET_SCRIPT = "return redis.call('get', KEYS[1])";
const GET_SHA = createHash('sha1').update(GET_SCRIPT).digest('hex');

describe('exactly what Valkey does (issue 28)', () => {
  let direct: ValkeyNode;
  let standalone: ValkeyNode;
  let cluster: ValkeyCluster;
  let oracle: OracleTargets | undefined;
  const targets: Array<{ name: string; port: number }> = [];

  beforeAll(async () => {
    oracle = await startOracleTargets({ replicasPerPrimary: 1 });
    ({ direct, standalone, cluster } = oracle);
    targets.push(...oracle.targets);
    for (const t of targets) {
      const c = await RawConnection.connect(t.port);
      expect(await c.call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY)).toBe('$8\r\nexactlib\r\n');
      c.close();
    }
  }, 120_000);

  afterAll(async () => {
    await oracle?.stop();
  });

  it('MONITOR shows what a script and a function run, after their own line, as Valkey does', async () => {
    const shown = async (port: number): Promise<string[]> => {
      const monitor = await RawClient.connect(port);
      expect(await monitor.call('MONITOR')).toBe('OK');
      const c = await RawClient.connect(port);
      await c.call('EVAL', SET_THEN_GET, '1', '{m}k');
      await c.call('FCALL', 'ro', '1', '{m}k');
      await c.call('FCALL', 'rw', '1', '{m}n');
      await c.call('PING');
      // Every line, up to the PING, within a bound (a missing line would be a hang, not a difference).
      await waitFor(() => monitor.unsolicited.some((l) => String(l).includes('"PING"')), `port ${port}: the PING line`, 5000);
      const lines = monitor.unsolicited.map(String).map((l) => l.replace(/^\d+\.\d{6} /, '').replace(/^\[0 [^\]]*:\d+\]/, '[0 client]'));
      monitor.close();
      c.close();
      return lines.slice(0, lines.findIndex((l) => l.includes('"PING"')) + 1);
    };
    const want = await shown(direct.port);
    expect(want).toEqual([
      `[0 client] "EVAL" "${SET_THEN_GET}" "1" "{m}k"`,
      '[0 lua] "set" "{m}k" "1"',
      '[0 lua] "get" "{m}k"',
      '[0 client] "FCALL" "ro" "1" "{m}k"',
      '[0 lua] "get" "{m}k"',
      '[0 client] "FCALL" "rw" "1" "{m}n"',
      '[0 lua] "incr" "{m}n"',
      '[0 client] "PING"',
    ]);
    for (const t of targets.slice(1)) expect(await shown(t.port), t.name).toEqual(want);
  });

  it('CLIENT PAUSE WRITE: read-only scripts and no-writes functions run at once, a script whose flags say nothing waits', async () => {
    const PAUSE_MS = 2500;
    const cases: Array<[string, Array<string>]> = [
      ['EVAL_RO', ['EVAL_RO', "return redis.call('get', KEYS[1])", '1', '{p}k']],
      ['EVALSHA_RO', ['EVALSHA_RO', 'SHA', '1', '{p}k']],
      ['FCALL_RO', ['FCALL_RO', 'ro', '1', '{p}k']],
      ['FCALL of a no-writes function', ['FCALL', 'ro', '1', '{p}k']],
      ['EVAL #!lua flags=no-writes', ['EVAL', "#!lua flags=no-writes\nreturn 1", '0']],
      ['EVAL without flags', ['EVAL', 'return 1', '0']],
      ['FCALL of a function that writes', ['FCALL', 'rw', '1', '{p}n']],
    ];
    const held = async (port: number): Promise<Record<string, boolean>> => {
      const admin = await RawConnection.connect(port);
      const sha = (await admin.call('SCRIPT', 'LOAD', "return redis.call('get', KEYS[1])")).split('\r\n')[1]!;
      const out: Record<string, boolean> = {};
      for (const [name, command] of cases) {
        expect(await admin.call('CLIENT', 'PAUSE', String(PAUSE_MS), 'WRITE')).toBe('+OK\r\n');
        const c = await RawConnection.connect(port);
        const started = Date.now();
        await c.call(...command.map((a) => (a === 'SHA' ? sha : a)));
        out[name] = Date.now() - started > PAUSE_MS / 2; // finished at once, or only once the pause ended
        c.close();
        expect(await admin.call('CLIENT', 'UNPAUSE')).toBe('+OK\r\n');
      }
      admin.close();
      return out;
    };
    const want = await held(direct.port);
    expect(want).toEqual({
      EVAL_RO: false, EVALSHA_RO: false, FCALL_RO: false, 'FCALL of a no-writes function': false,
      'EVAL #!lua flags=no-writes': false, 'EVAL without flags': true, 'FCALL of a function that writes': true,
    });
    for (const t of targets.slice(1)) expect(await held(t.port), t.name).toEqual(want);
  }, 90_000);

  it('a user made at run time with ACL SETUSER runs scripts as on Valkey (default settings)', async () => {
    const run = async (port: number): Promise<string[]> => {
      const admin = await RawConnection.connect(port);
      expect(await admin.call('ACL', 'SETUSER', 'bob', 'on', '>pw', '+@scripting', '+set', '+get', '~x*')).toBe('+OK\r\n');
      admin.close();
      const c = await RawConnection.connect(port);
      const out: string[] = [await c.call('AUTH', 'bob', 'pw')];
      out.push(await c.call('EVAL', "return redis.call('set', KEYS[1], 1)", '1', 'x{a}1'));
      out.push(await c.call('EVAL', "return redis.call('get', KEYS[1])", '1', 'x{a}1'));
      // a key the user may not touch, named inside the script only: the node refuses it
      const denied = await c.call('EVAL', "return redis.call('get', 'y{a}1')", '0');
      out.push(denied.startsWith('-') ? denied.slice(0, denied.indexOf(' ')) : denied);
      c.close();
      return out;
    };
    const want = await run(direct.port);
    expect(want).toEqual(['+OK\r\n', '+OK\r\n', '$1\r\n1\r\n', '-ERR']);
    for (const t of targets.slice(1)) {
      await waitFor(async () => (await run(t.port))[1] === '+OK\r\n', `${t.name}: bob's script runs`, 10_000, 200);
      expect(await run(t.port), t.name).toEqual(want);
    }
  }, 60_000);

  it('HELLO names the server as the nodes do, after CONFIG SET extended-redis-compatibility too', async () => {
    const names = async (port: number): Promise<string[]> => {
      const c = await RawClient.connect(port);
      const out: string[] = [];
      const hello = async () => {
        const reply = (await c.call('HELLO', '2')) as unknown as string[];
        out.push(`${reply[1]} ${reply[3]}`);
      };
      await hello();
      expect(await c.call('CONFIG', 'SET', 'extended-redis-compatibility', 'yes')).toBe('OK');
      await hello();
      expect(await c.call('CONFIG', 'SET', 'extended-redis-compatibility', 'no')).toBe('OK');
      await hello();
      c.close();
      return out;
    };
    const want = await names(direct.port);
    expect(want).toEqual(['valkey 8.0.1', 'redis 7.2.4', 'valkey 8.0.1']);
    for (const t of targets.slice(1)) expect(await names(t.port), t.name).toEqual(want);
  });

  it('LATENCY LATEST / HISTORY / DOCTOR in a cluster: every node\'s events, each named with its node; standalone as the server', async () => {
    const slow = ['EVAL', 'local i = 0 while i < 3000000 do i = i + 1 end return i', '1', '{lat}k'];
    const overStandalone = targets[1]!;
    const overCluster = targets[2]!;
    const c = await RawClient.connect(overCluster.port);
    expect(await c.call('CONFIG', 'SET', 'latency-monitor-threshold', '1')).toBe('OK'); // on every node
    await c.call(...slow);
    const owner = await cluster.primaryForSlot(calculateSlot('{lat}k'));
    const ownerAddress = `${owner.host}:${owner.port}`;
    const node = await RawClient.connect(owner.port);
    const nodeLatest = (await node.call('LATENCY', 'LATEST')) as unknown as Array<[string, number, number, number]>;
    const latest = (await c.call('LATENCY', 'LATEST')) as unknown as Array<[string, number, number, number]>;
    expect(nodeLatest.find((r) => r[0] === 'command')).toBeDefined();
    expect(latest).toContainEqual([`command@${ownerAddress}`, ...nodeLatest.find((r) => r[0] === 'command')!.slice(1)]);
    expect(await c.call('LATENCY', 'HISTORY', `command@${ownerAddress}`)).toEqual(await node.call('LATENCY', 'HISTORY', 'command'));
    const doctor = String(await c.call('LATENCY', 'DOCTOR'));
    expect(doctor).toContain(`--- ${ownerAddress} (primary) ---`);
    expect(doctor).toMatch(/command: 1 latency spikes/);
    expect(await c.call('LATENCY', 'RESET', `command@${ownerAddress}`)).toBe(1);
    expect((await node.call('LATENCY', 'LATEST')) as unknown[]).toEqual([]);
    expect(await c.call('CONFIG', 'SET', 'latency-monitor-threshold', '0')).toBe('OK');
    c.close();
    node.close();
    // In front of one server: the server's own answer.
    const s = await RawClient.connect(overStandalone.port);
    const n = await RawClient.connect(standalone.port);
    expect(await s.call('CONFIG', 'SET', 'latency-monitor-threshold', '1')).toBe('OK');
    await s.call(...slow);
    expect(await s.call('LATENCY', 'LATEST')).toEqual(await n.call('LATENCY', 'LATEST'));
    expect(await s.call('LATENCY', 'RESET')).toBe(1);
    expect(await s.call('CONFIG', 'SET', 'latency-monitor-threshold', '0')).toBe('OK');
    s.close();
    n.close();
  });

  it('LATENCY HISTOGRAM after a pipeline of SETs counts every one of them', async () => {
    const counted = async (port: number): Promise<string> => {
      const c = await RawConnection.connect(port);
      expect(await c.call('CONFIG', 'RESETSTAT')).toBe('+OK\r\n');
      c.write(Buffer.concat([...Array.from({ length: 37 }, (_, i) => encodeCommand(['SET', `h{t}${i}`, 'v'])), encodeCommand(['LATENCY', 'HISTOGRAM', 'set'])]));
      for (let i = 0; i < 37; i++) expect(await c.read()).toBe('+OK\r\n');
      const histogram = await c.read();
      c.close();
      return /calls\r\n:(\d+)/.exec(histogram)?.[1] ?? histogram;
    };
    expect(await counted(direct.port)).toBe('37');
    for (const t of targets.slice(1)) for (let round = 0; round < 3; round++) expect(await counted(t.port), t.name).toBe('37');
  });

  it('SLOWLOG logs the commands EXEC ran (not EXEC), and a blocked command once it was served', async () => {
    const logged = async (port: number): Promise<string[]> => {
      const admin = await RawClient.connect(port);
      expect(await admin.call('CONFIG', 'SET', 'slowlog-log-slower-than', '0')).toBe('OK');
      await admin.call('SLOWLOG', 'RESET');
      const c = await RawClient.connect(port);
      await c.call('MULTI');
      await c.call('SET', 's{t}a', '1');
      await c.call('GET', 's{t}a');
      await c.call('EXEC');
      const blocked = await RawClient.connect(port);
      const popped = blocked.call('BLPOP', 's{t}q', '5');
      await waitFor(async () => /blocked_clients:1/.test(String(await admin.call('INFO', 'clients'))), `port ${port}: the BLPOP blocked`, 5000);
      await new Promise((r) => setTimeout(r, 300)); // it waits 300 ms: not part of its logged time
      await c.call('RPUSH', 's{t}q', 'v');
      await popped;
      const entries = (await admin.call('SLOWLOG', 'GET', '-1')) as unknown as Array<[number, number, number, string[]]>;
      await admin.call('CONFIG', 'SET', 'slowlog-log-slower-than', '10000');
      for (const x of [admin, c, blocked]) x.close();
      const blpop = entries.find((e) => e[3][0] === 'BLPOP');
      expect(blpop?.[2], `port ${port}: BLPOP's logged time`).toBeLessThan(200_000);
      // The push and the pop it served arrive at respool on two connections: their order in the
      // log is that of their replies, so it is not compared.
      const names = entries.map((e) => e[3].join(' ')).filter((l) => !/^(slowlog|info|config|client)/i.test(l)).reverse();
      return [...names.slice(0, 3), ...names.slice(3).sort()];
    };
    const want = await logged(direct.port);
    expect(want).toEqual(['MULTI', 'SET s{t}a 1', 'GET s{t}a', 'BLPOP s{t}q 5', 'RPUSH s{t}q v']);
    for (const t of targets.slice(1)) expect(await logged(t.port), t.name).toEqual(want);
  });

  it('SAVE of a data set that takes longer than timeouts.commandMs: answered as Valkey answers it, and a GET meanwhile too', async () => {
    const node = await startStandalone();
    const proxy = await startTestProxy([node], { mode: 'standalone', timeouts: { commandMs: 50 } } as never);
    try {
      const load = await RawConnection.connect(node.port);
      const value = randomBytes(1024 * 1024);
      load.write(Buffer.concat(Array.from({ length: 200 }, (_, i) => encodeCommand(['SET', `save:${i}`, value]))));
      for (let i = 0; i < 200; i++) expect(await load.read(10_000)).toBe('+OK\r\n');
      const started = Date.now();
      // the oracle: how long this node's SAVE takes (seconds on a slow CI disk: wait long enough)
      load.send('SAVE');
      expect(await load.read(30_000)).toBe('+OK\r\n');
      const saveMs = Date.now() - started;
      load.close();
      const c = await RawConnection.connect(proxy.address.port);
      const other = await RawConnection.connect(proxy.address.port);
      expect(await other.call('GET', 'save:none')).toBe('$-1\r\n'); // its link is open before the SAVE
      c.send('SAVE');
      const saving = c.read(30_000);
      await new Promise((r) => setTimeout(r, 10));
      other.send('GET', 'save:none'); // on another link: waits for the node as the SAVE does
      const getting = other.read(30_000);
      expect(await saving).toBe('+OK\r\n');
      expect(await getting).toBe('$-1\r\n');
      expect(saveMs, 'the node took longer than the 50 ms command timeout to SAVE').toBeGreaterThan(50);
      c.close();
      other.close();
    } finally {
      await proxy.close();
      await node.stop();
    }
  }, 60_000);

  it('CLIENT INFO tot-cmds counts what ran, as Valkey counts it', async () => {
    const sequences: string[][][] = [
      [['SET', 'c{t}a', '1'], ['GET', 'c{t}a']],
      [['MULTI'], ['SET', 'c{t}a', '1'], ['GET', 'c{t}a'], ['EXEC']],
      [['MULTI'], ['SET', 'c{t}a', '1'], ['DISCARD']],
      [['MULTI'], ['NOSUCH'], ['EXEC']],
      [['MULTI'], ['MULTI'], ['EXEC']],
      [['MULTI'], ['GET'], ['EXEC']],
      [['GET'], ['GET', 'a', 'b'], ['PING']],
      [['NOSUCH'], ['CLIENT', 'NOSUCH'], ['PING']],
      [['WATCH', 'c{t}a'], ['MULTI'], ['SET', 'c{t}a', '2'], ['EXEC']],
      [['BLPOP', 'c{t}q', '0.01']],
      [['SUBSCRIBE', 'ch'], ['UNSUBSCRIBE', 'ch']],
      [['AUTH', 'nobody', 'wrong'], ['PING']],
      // What a script or function runs counts in its caller's tot-cmds (introspection.tcl "client
      // input output and command process statistics": EVAL "server.call('ping')" 0 → +2) — with
      // respool's default (clients.scriptCommandCounts self) once the client asked CLIENT INFO,
      // as that test does.
      [['CLIENT', 'INFO'], ['EVAL', "server.call('ping')", '0']],
      [['CLIENT', 'INFO'], ['EVAL', SET_THEN_GET, '1', 'c{t}a'], ['EVAL', "return #redis.call('keys', '*')", '0']],
      [['CLIENT', 'INFO'], ['SCRIPT', 'LOAD', SET_THEN_GET], ['EVALSHA', SET_THEN_GET_SHA, '1', 'c{t}a'], ['EVALSHA_RO', GET_SHA, '1', 'c{t}a']],
      [['CLIENT', 'INFO'], ['EVAL_RO', "return redis.call('get', KEYS[1])", '1', 'c{t}a'], ['EVAL', "return redis.pcall('nosuch')", '0'], ['EVAL', "return redis.call('incr', 'c{t}a', 'x')", '1', 'c{t}a']],
      [['CLIENT', 'INFO'], ['FCALL', 'rw', '1', 'c{t}n'], ['FCALL_RO', 'ro', '1', 'c{t}n'], ['FCALL', 'ro', '1', 'c{t}n']],
    ];
    // An EVALSHA of a script the node lost (SCRIPT FLUSH on the node itself): respool loads it
    // again and runs it once more; only that run's commands count, as on a node that had it.
    for (const t of targets) {
      const c = await RawConnection.connect(t.port);
      await c.call('SCRIPT', 'LOAD', GET_SCRIPT);
      c.close();
    }
    for (const node of [standalone, ...cluster.nodes]) await node.call('SCRIPT', 'FLUSH');
    await direct.call('SCRIPT', 'LOAD', GET_SCRIPT);
    sequences.push([['CLIENT', 'INFO'], ['EVALSHA', GET_SHA, '1', 'c{t}a']]);
    const counts = async (port: number, proto: 2 | 3): Promise<string[]> => {
      const out: string[] = [];
      for (const seq of sequences) {
        const c = await connect(port, proto);
        for (const cmd of seq) await c.call(...cmd);
        const info = await c.call('CLIENT', 'INFO');
        out.push(`${seq.map((s) => s.join(' ')).join(' | ')} → ${/tot-cmds=(\d+)/.exec(info)?.[1]}`);
        c.close();
      }
      return out;
    };
    for (const proto of [2, 3] as const) {
      const want = await counts(direct.port, proto);
      for (const t of targets.slice(1)) expect(await counts(t.port, proto), `${t.name}, RESP${proto}`).toEqual(want);
    }
  }, 60_000);

  it('clients.scriptCommandCounts: always counts a client that never asked CLIENT INFO; never counts the script alone', async () => {
    const seq = [['EVAL', SET_THEN_GET, '1', 'c{t}a'], ['FCALL', 'rw', '1', 'c{t}n']];
    const count = async (port: number): Promise<number> => {
      const c = await connect(port, 2);
      for (const cmd of seq) await c.call(...cmd);
      const info = String(await c.call('CLIENT', 'INFO'));
      c.close();
      return Number(/tot-cmds=(\d+)/.exec(info)?.[1]);
    };
    const want = await count(direct.port);
    expect(want).toBe(5); // EVAL + SET + GET, FCALL + INCR
    for (const [setting, expected] of [['always', want], ['never', seq.length], ['self', seq.length]] as const) {
      const proxy = await startTestProxy([standalone], { mode: 'standalone', clients: { scriptCommandCounts: setting } } as never);
      try {
        expect(await count(proxy.address.port), setting).toBe(expected);
      } finally {
        await proxy.close();
      }
    }
  }, 60_000);

  it('admission answers in Valkey\'s order: unknown subcommand, arity, no-multi, inside and outside MULTI and on a WATCH lane', async () => {
    const sequences: string[][][] = [
      [['CLIENT', 'NOSUCH'], ['CONFIG'], ['GET'], ['GET', 'a{q}', 'b'], ['CLIENT', 'UNBLOCK', '1', 'TIMEOUT', 'x'], ['PING', 'a', 'b'], ['MONITOR', 'x']],
      [['EXEC', 'x'], ['DISCARD', 'x'], ['MULTI', 'x'], ['WATCH'], ['UNWATCH', 'x'], ['PUBLISH', 'ch'], ['CLIENT', 'SETNAME'], ['SELECT']],
      [['MULTI'], ['GET'], ['CLIENT', 'NOSUCH'], ['NOSUCH', 'x'], ['WATCH', 'a{q}'], ['MULTI'], ['SET', 'a{q}', '1'], ['EXEC']],
      [['MULTI'], ['PING', 'a', 'b'], ['ECHO', 'e'], ['EXEC']],
      [['MULTI'], ['SET', 'a{q}', '1'], ['EXEC', 'x'], ['EXEC'], ['GET', 'a{q}']],
      [['MULTI'], ['DISCARD', 'x'], ['EXEC']],
      [['WATCH', 'b{q}'], ['GET'], ['MULTI'], ['GET'], ['SET', 'b{q}', '1'], ['EXEC'], ['GET', 'b{q}']],
      [['WATCH', 'b{q}'], ['MULTI'], ['SET', 'b{q}', '2'], ['EXEC', 'x'], ['EXEC'], ['GET', 'b{q}']],
      [['SUBSCRIBE', 'ch'], ['GET'], ['GET', 'k'], ['PING']],
    ];
    const transcript = async (port: number): Promise<string[]> => {
      const out: string[] = [];
      const setup = await RawConnection.connect(port);
      await setup.call('DEL', 'a{q}', 'b{q}');
      setup.close();
      for (const seq of sequences) {
        const c = await RawConnection.connect(port);
        for (const cmd of seq) out.push(`${cmd.join(' ')} → ${await c.call(...cmd)}`);
        c.close();
      }
      return out;
    };
    const want = await transcript(direct.port);
    for (const t of targets.slice(1)) expect(await transcript(t.port), t.name).toEqual(want);
  });

  it('CLIENT PAUSE holds only what the ACL lets through: a denied write is answered at once, as Valkey answers it', async () => {
    const answers = async (port: number): Promise<string[]> => {
      const admin = await RawConnection.connect(port);
      expect(await admin.call('ACL', 'SETUSER', 'pausero', 'on', '>pw', '+get', '+auth', '+client|info', '~*')).toBe('+OK\r\n');
      const user = await RawConnection.connect(port);
      expect(await user.call('AUTH', 'pausero', 'pw')).toBe('+OK\r\n');
      expect(await admin.call('CLIENT', 'PAUSE', '5000', 'WRITE')).toBe('+OK\r\n');
      const started = Date.now();
      const denied = await user.call('SET', 'p{q}', '1');
      const read = await user.call('GET', 'p{q}');
      const waited = Date.now() - started;
      await admin.call('CLIENT', 'UNPAUSE');
      await admin.call('ACL', 'DELUSER', 'pausero');
      admin.close();
      user.close();
      expect(waited, `port ${port}: answered during the pause`).toBeLessThan(2500);
      return [denied.replace(/user pausero/i, 'user pausero'), read];
    };
    const want = await answers(direct.port);
    for (const t of targets.slice(1)) expect(await answers(t.port), t.name).toEqual(want);
  }, 30_000);
});
