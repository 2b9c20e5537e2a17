// SLOWLOG RESET inside a transaction whose push wakes a blocked pop (issue 28;
// tests/unit/slowlog.tcl "Rewritten commands are logged as their original command"): Valkey runs
// the transaction — the RESET clears what was logged before — and then serves the pop, whose entry
// stays. Through respool the pop's reply and EXEC's come on two connections (or the pop is served
// by respool itself, parking/parked-pops.ts, before EXEC's reply is passed on); either way the
// RESET must not clear it. respool in front of a standalone server and of a 3-primary cluster,
// side by side with one valkey-server over the same exchange (the oracle), RESP2 and RESP3, in
// rounds (the order the two replies reach respool in varies).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ValkeyNode } from '../harness/valkey-processes.js';
import { RawClient, type RespReply } from '../harness/raw-client.js';
import { startOracleTargets, type OracleTargets } from '../helpers/oracle-targets.js';
import { sleep } from '../helpers/wait.js';

const ROUNDS = 8;

async function connect(port: number, protocol: 2 | 3): Promise<RawClient> {
  const c = await RawClient.connect(port);
  if (protocol === 3) expect(await c.call('HELLO', '3')).toBeInstanceOf(Map);
  return c;
}

/** SLOWLOG GET's entries (newest first), each as its arguments joined, in lower case (each keeps the case it was sent in). */
async function slowlog(c: RawClient): Promise<string[]> {
  const reply = (await c.call('SLOWLOG', 'GET', '-1')) as RespReply[][];
  return reply.map((e) => (e[3] as string[]).map(String).join(' ').toLowerCase());
}

// Parked at respool (dedicated.parkPops, the default), and sent to the node on a connection of its own.
for (const parkPops of [true, false]) describe(`SLOWLOG RESET inside MULTI whose LPUSH wakes a BLPOP (parkPops ${parkPops})`, () => {
  let direct: ValkeyNode;
  let oracle: OracleTargets | undefined;
  const targets: Array<{ name: string; port: number }> = [];

  beforeAll(async () => {
    oracle = await startOracleTargets({ replicasPerPrimary: 0, proxy: { dedicated: { parkPops } } });
    direct = oracle.direct;
    targets.push(...oracle.targets);
  }, 120_000);

  afterAll(async () => {
    await oracle?.stop();
  });

  for (const protocol of [2, 3] as const) {
    it(`RESP${protocol}: the pop's entry stays, what was logged before EXEC goes`, async () => {
      const run = async (port: number): Promise<string[][]> => {
        const c = await connect(port, protocol);
        expect(await c.call('CONFIG', 'SET', 'slowlog-log-slower-than', '0')).toBe('OK');
        const rounds: string[][] = [];
        for (let round = 0; round < ROUNDS; round++) {
          await c.call('DEL', 'l');
          const popper = await connect(port, protocol);
          const pop = popper.call('BLPOP', 'l', '0');
          await sleep(50); // blocked (or parked at respool)
          await c.call('SET', 'before', String(round)); // logged before EXEC: the RESET clears it
          expect(await c.call('MULTI')).toBe('OK');
          expect(await c.call('LPUSH', 'l', 'foo')).toBe('QUEUED');
          expect(await c.call('SLOWLOG', 'RESET')).toBe('QUEUED');
          expect(await c.call('EXEC')).toEqual([1, 'OK']);
          expect(await pop).toEqual(['l', 'foo']);
          popper.close();
          const entries = await slowlog(c);
          // Only the first entry is Valkey's exact word here: what the transaction's own commands
          // leave is checked below (the oracle's list), without entries respool logs of itself.
          rounds.push([entries[0]!, String(entries.includes(`set before ${round}`))]);
        }
        expect(await c.call('CONFIG', 'SET', 'slowlog-log-slower-than', '10000')).toBe('OK');
        c.close();
        return rounds;
      };
      const want = await run(direct.port);
      expect(want).toEqual(Array.from({ length: ROUNDS }, () => ['blpop l 0', 'false']));
      for (const t of targets.slice(1)) expect(await run(t.port), t.name).toEqual(want);
    });
  }
});
