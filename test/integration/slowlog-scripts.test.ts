// SLOWLOG and the commands a script or function runs (issue 28): Valkey logs each one as its own
// entry, older than the script's, with the calling client's address and name
// (tests/unit/slowlog.tcl "the commands in script are recorded normally"). respool, in front of a
// standalone server and of a 3-primary cluster, side by side with one valkey-server over the same
// exchange (the oracle), RESP2 and RESP3: while its threshold is 0 it logs them from the nodes'
// MONITOR (client/script-commands.ts); above 0 it does not (it cannot time them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ValkeyNode } from '../harness/valkey-processes.js';
import { RawClient, type RespReply } from '../harness/raw-client.js';
import { startOracleTargets, type OracleTargets } from '../helpers/oracle-targets.js';

const LIBRARY = "#!lua name=slowlib\nredis.register_function('myfunc', function(KEYS, ARGS) server.call('ping') end)";
/** Runs tens of ms (a Lua loop: TIME stands still inside a script), then a PING: slow itself, its commands fast. */
const SLOW_SCRIPT = "local x = 0 for i = 1, 3000000 do x = x + i end server.call('ping') return 1";

type Entry = { args: string[]; addr: string; name: string };

/** SLOWLOG GET's entries (newest first): arguments, address, name. */
async function slowlog(c: RawClient, count: number): Promise<Entry[]> {
  const reply = (await c.call('SLOWLOG', 'GET', String(count))) as RespReply[][];
  return reply.map((e) => ({ args: (e[3] as string[]).map(String), addr: String(e[4]), name: String(e[5]) }));
}

async function connect(port: number, protocol: 2 | 3, name: string): Promise<RawClient> {
  const c = await RawClient.connect(port);
  if (protocol === 3) expect(await c.call('HELLO', '3')).toBeInstanceOf(Map);
  expect(await c.call('CLIENT', 'SETNAME', name)).toBe('OK');
  return c;
}

/** The address the server (or respool) knows `c` by. */
const self = (c: RawClient) => `${c.socket.localAddress}:${c.socket.localPort}`;

describe('SLOWLOG logs the commands a script or function runs, as Valkey does', () => {
  let direct: ValkeyNode;
  let oracle: OracleTargets | undefined;
  const targets: Array<{ name: string; port: number }> = [];

  beforeAll(async () => {
    oracle = await startOracleTargets({ replicasPerPrimary: 0 });
    direct = oracle.direct;
    targets.push(...oracle.targets);
    for (const t of targets) {
      const c = await RawClient.connect(t.port);
      expect(await c.call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY)).toBe('slowlib');
      c.close();
    }
  }, 120_000);

  afterAll(async () => {
    await oracle?.stop();
  });

  for (const protocol of [2, 3] as const) {
    it(`RESP${protocol}: EVAL and FCALL, each command the script called logged before it, with the caller's address and name (slowlog.tcl)`, async () => {
      const run = async (port: number): Promise<unknown[]> => {
        const out: unknown[] = [];
        for (const call of [['EVAL', "server.call('ping')", '0'], ['FCALL', 'myfunc', '0']]) {
          const c = await connect(port, protocol, 'test-client');
          expect(await c.call('CONFIG', 'SET', 'slowlog-log-slower-than', '0')).toBe('OK');
          expect(await c.call('SLOWLOG', 'RESET')).toBe('OK');
          await c.call(...call);
          const [script, ping] = await slowlog(c, 2);
          expect(await c.call('CONFIG', 'SET', 'slowlog-log-slower-than', '10000')).toBe('OK');
          out.push([script?.args, ping?.args, script?.name, ping?.name, script?.addr === self(c), ping?.addr === self(c)]);
          c.close();
        }
        return out;
      };
      const want = await run(direct.port);
      expect(want).toEqual([
        [['EVAL', "server.call('ping')", '0'], ['ping'], 'test-client', 'test-client', true, true],
        [['FCALL', 'myfunc', '0'], ['ping'], 'test-client', 'test-client', true, true],
      ]);
      for (const t of targets.slice(1)) expect(await run(t.port), t.name).toEqual(want);
    });

    it(`RESP${protocol}: two clients' scripts at once, each command logged with its own client's name and address`, async () => {
      const ROUNDS = 15;
      const run = async (port: number): Promise<Record<string, string[]>> => {
        const admin = await connect(port, protocol, 'admin');
        const clients = await Promise.all(['client-a', 'client-b'].map((name) => connect(port, protocol, name)));
        expect(await admin.call('CONFIG', 'SET', 'slowlog-log-slower-than', '0')).toBe('OK');
        expect(await admin.call('SLOWLOG', 'RESET')).toBe('OK');
        // pipelined, both at once: one key slot, so through respool they share the node (and its links)
        await Promise.all(clients.map((c, n) => Promise.all(Array.from({ length: ROUNDS }, (_, i) =>
          c.call('EVAL', "server.call('set', KEYS[1], ARGV[1]) return server.call('echo', ARGV[1])", '1', `{sl}${n}`, `${['client-a', 'client-b'][n]}-${i}`)))));
        const entries = (await slowlog(admin, -1)).reverse();
        expect(await admin.call('CONFIG', 'SET', 'slowlog-log-slower-than', '10000')).toBe('OK');
        // per client, what was logged under its name and whether it was all under its own address
        const out: Record<string, string[]> = {};
        for (const [n, c] of clients.entries()) {
          const name = ['client-a', 'client-b'][n]!;
          const mine = entries.filter((e) => e.name === name);
          out[name] = mine.map((e) => `${e.args[0]!.toLowerCase()} ${e.args.at(-1)}`);
          out[`${name} addresses`] = [...new Set(mine.map((e) => (e.addr === self(c) ? 'its own' : e.addr)))];
          c.close();
        }
        admin.close();
        return out;
      };
      const want = await run(direct.port);
      const expected = (name: string) => Array.from({ length: ROUNDS }, (_, i) => [`set ${name}-${i}`, `echo ${name}-${i}`, `eval ${name}-${i}`]).flat();
      expect(want).toEqual({ 'client-a': expected('client-a'), 'client-a addresses': ['its own'], 'client-b': expected('client-b'), 'client-b addresses': ['its own'] });
      for (const t of targets.slice(1)) expect(await run(t.port), t.name).toEqual(want);
    });

    it(`RESP${protocol}: above threshold 0 the commands a script called are not logged (only the slow script itself)`, async () => {
      const run = async (port: number): Promise<string[][]> => {
        const c = await connect(port, protocol, 'test-client');
        expect(await c.call('CONFIG', 'SET', 'slowlog-log-slower-than', '10000')).toBe('OK');
        expect(await c.call('SLOWLOG', 'RESET')).toBe('OK');
        expect(await c.call('EVAL', SLOW_SCRIPT, '0')).toBe(1);
        const entries = await slowlog(c, -1);
        c.close();
        return entries.map((e) => e.args);
      };
      const want = await run(direct.port);
      expect(want.map((args) => args[0])).toEqual(['EVAL']); // the script (its body cut at 128 bytes, as Valkey cuts it)
      for (const t of targets.slice(1)) expect(await run(t.port), t.name).toEqual(want);
    });
  }
});
