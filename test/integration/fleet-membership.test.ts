// A fleet of three respool processes (cluster.peers) in front of a 3+3 cluster: a member killed
// while an iovalkey Cluster client writes through the fleet loses its slots within the bound,
// no acknowledged write is lost, and the member gets its slots back (and its clients) once
// restarted; valkey-cli -c the same; a paused member is marked fail by its silence alone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster } from 'iovalkey';
import { freePort, startCluster, VALKEY_CLI, type ValkeyCluster } from '../harness/valkey-processes.js';
import { RawClient, type RespReply } from '../harness/raw-client.js';
import { RespoolProcess, stopAll } from '../helpers/respool-process.js';
import { sleep, waitFor } from '../helpers/wait.js';

const run = promisify(execFile);

async function command(port: number, ...args: Array<string | number>): Promise<RespReply> {
  const c = await RawClient.connect(port);
  try {
    return await c.call(...args);
  } finally {
    c.close();
  }
}

/** port → its slot count, from one instance's CLUSTER SLOTS. */
async function slotsByPort(port: number): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const r of (await command(port, 'CLUSTER', 'SLOTS')) as RespReply[][]) {
    const p = (r[2] as RespReply[])[1] as number;
    out.set(p, (out.get(p) ?? 0) + (r[1] as number) - (r[0] as number) + 1);
  }
  return out;
}

async function nodeLine(askPort: number, memberPort: number): Promise<string> {
  const text = String(await command(askPort, 'CLUSTER', 'NODES'));
  return text.split('\n').find((l) => l.includes(`127.0.0.1:${memberPort}@`)) ?? '';
}

async function setsServed(adminPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const m = /^respool_commands_total\{command="set"\} (\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

describe('a fleet of 3 respool processes in front of a 3+3 cluster', () => {
  let cluster: ValkeyCluster;
  const fleet: RespoolProcess[] = [];
  const ports: number[] = [];
  const admins: number[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    for (let i = 0; i < 3; i++) {
      ports.push(await freePort());
      admins.push(await freePort());
    }
    const peers = ports.map((p) => `127.0.0.1:${p}`).join(',');
    const seed = `${cluster.nodes[0]!.host}:${cluster.nodes[0]!.port}`;
    await Promise.all(ports.map(async (port, i) => {
      fleet[i] = await RespoolProcess.start(port, [
        '--upstream', seed, '--cluster-peer', peers, '--admin', `127.0.0.1:${admins[i]}`, '--log-level', 'info',
      ], { RESPOOL_CLUSTER_PEER_REJOIN_AFTER_MS: '2s' });
    }));
    await waitFor(async () => {
      for (const p of ports) if ((await slotsByPort(p)).size !== 3) return false;
      return true;
    }, 'every member to see three live members', 10_000);
  }, 60_000);

  afterAll(async () => {
    await stopAll();
    await cluster?.stop();
  });

  it('every member shows the same division; a killed member\'s slots move within 3 s, no acknowledged write is lost, and it gets them back once restarted', async () => {
    const views = await Promise.all(ports.map((p) => command(p, 'CLUSTER', 'SLOTS')));
    expect(views[1]).toEqual(views[0]);
    expect(views[2]).toEqual(views[0]);

    const client = new Cluster([{ host: '127.0.0.1', port: ports[0]! }], { redisOptions: { maxRetriesPerRequest: 1 }, slotsRefreshInterval: 1000 });
    const acked = new Map<string, string>();
    const errors: Array<{ at: number; message: string }> = [];
    let stop = false;
    let n = 0;
    const writer = async () => {
      while (!stop) {
        const key = `fleet:w:${n++}`;
        const value = `v${n}`;
        try {
          await client.set(key, value);
          acked.set(key, value);
        } catch (err) {
          errors.push({ at: Date.now(), message: (err as Error).message });
        }
      }
    };
    const writers = Array.from({ length: 8 }, writer);
    // the victim serves its share of the client's writes (polled: how soon depends on the machine's load)
    await waitFor(async () => (await setsServed(admins[2]!)) > 0, 'the victim to serve some of the client\'s writes', 10_000, 50);

    const victim = fleet[2]!;
    const killedAt = Date.now();
    await victim.kill();
    // The survivors move its slots within the bound (3 s by default).
    await waitFor(async () => !(await slotsByPort(ports[0]!)).has(ports[2]!) && !(await slotsByPort(ports[1]!)).has(ports[2]!), 'the dead member\'s slots to move', 3000, 20);
    const movedAfterMs = Date.now() - killedAt;
    expect(await nodeLine(ports[0]!, ports[2]!)).toMatch(/ master,fail - 0 \d+ \d+ disconnected$/);
    expect(String(await command(ports[1]!, 'CLUSTER', 'INFO'))).toMatch(/^cluster_state:ok\r\n/);
    expect([...(await slotsByPort(ports[0]!)).values()].reduce((a, b) => a + b, 0)).toBe(16384);
    // Seeing it: RESPOOL FLEET, /fleet, respool_fleet_members{state}.
    const members = ((await command(ports[0]!, 'RESPOOL', 'FLEET')) as RespReply[][]).map((e) => Object.fromEntries(e.flatMap((v, i) => (i % 2 === 0 ? [[String(v), e[i + 1]]] : []))));
    const byAddress = (a: unknown[], b: unknown[]) => (String(a[0]) < String(b[0]) ? -1 : 1);
    expect(members.map((m) => [m['member'], m['state']]).sort(byAddress)).toEqual(ports.map((p, i) => [`127.0.0.1:${p}`, i === 0 ? 'alive,myself' : i === 2 ? 'fail' : 'alive']).sort(byAddress));
    const dead = members.find((m) => m['member'] === `127.0.0.1:${ports[2]}`)!;
    expect([dead['slots'], dead['slot_ranges']]).toEqual([0, '']);
    expect(dead['last_seen_ms']).toBeGreaterThanOrEqual(0);
    expect(members.reduce((n, m) => n + (m['slots'] as number), 0)).toBe(16384);
    expect(members.find((m) => m['member'] === `127.0.0.1:${ports[0]}`)!['version']).toBeGreaterThanOrEqual(0);
    const view = await (await fetch(`http://127.0.0.1:${admins[1]}/fleet`)).json() as { members: Array<{ address: string; state: string; slots: number }>; state: { version: number } };
    expect(view.members.map((m) => m.state).sort()).toEqual(['alive', 'alive', 'fail']);
    expect(view.state.version).toBeGreaterThanOrEqual(0);
    const metrics = await (await fetch(`http://127.0.0.1:${admins[0]}/metrics`)).text();
    expect(metrics).toMatch(/^respool_fleet_members\{state="fail"\} 1$/m);
    expect(metrics).toMatch(/^respool_fleet_members\{state="alive"\} 2$/m);
    // The client's errors end once it refreshed its slots after they moved: within its
    // slotsRefreshInterval (1 s) of the move as measured, plus 2 s of room for a loaded machine.
    // Watched for 1 s past that bound, the writers still writing.
    const errorsEndWithinMs = movedAfterMs + 1000 + 2000;
    await sleep(Math.max(0, killedAt + errorsEndWithinMs + 1000 - Date.now()));
    const lastError = errors.length === 0 ? killedAt : Math.max(...errors.map((e) => e.at));
    console.log(`member killed: slots moved after ${movedAfterMs} ms; ${errors.length} client errors, the last ${lastError - killedAt} ms after the kill`);
    expect(lastError - killedAt).toBeLessThan(errorsEndWithinMs);

    // Restarted: a joining member first, then its slots back; the client sends it writes again.
    await victim.restart();
    await waitFor(async () => (await slotsByPort(ports[0]!)).has(ports[2]!) && (await slotsByPort(ports[1]!)).has(ports[2]!), 'the restarted member to get its slots back', 10_000, 50);
    expect(await slotsByPort(ports[0]!)).toEqual(new Map([...(await slotsByPort(ports[2]!))]));
    const servedAfterRestart = await setsServed(admins[2]!);
    await waitFor(async () => (await setsServed(admins[2]!)) > servedAfterRestart + 50, 'the client to write through the restarted member again', 10_000, 100);
    stop = true;
    await Promise.all(writers);
    client.disconnect();

    // Every acknowledged write is in the cluster.
    const keys = [...acked.keys()];
    expect(keys.length).toBeGreaterThan(500);
    const reader = await RawClient.connect(ports[0]!);
    try {
      for (let i = 0; i < keys.length; i += 500) {
        const chunk = keys.slice(i, i + 500);
        const values = await Promise.all(chunk.map((k) => reader.call('GET', k)));
        expect(values).toEqual(chunk.map((k) => acked.get(k)));
      }
    } finally {
      reader.close();
    }
    const down = [...fleet[0]!.events('member_down'), ...fleet[1]!.events('member_down')];
    expect(down.map((e) => e['member'])).toEqual([`127.0.0.1:${ports[2]}`, `127.0.0.1:${ports[2]}`]);
    expect(fleet[0]!.events('member_up').some((e) => e['member'] === `127.0.0.1:${ports[2]}`)).toBe(true);
  }, 60_000);

  it('valkey-cli -c writes and reads through a survivor while a member is dead, and through the member once it is back', async () => {
    const cli = (port: number, ...args: string[]) => run(VALKEY_CLI, ['-c', '-p', String(port), ...args]).then((r) => r.stdout.trim());
    const victim = fleet[1]!;
    await victim.kill();
    for (let i = 0; i < 20; i++) {
      expect(await cli(ports[0]!, 'SET', `cli:${i}`, `x${i}`)).toBe('OK');
      expect(await cli(ports[2]!, 'GET', `cli:${i}`)).toBe(`x${i}`);
    }
    await waitFor(async () => /master,fail/.test(await nodeLine(ports[0]!, ports[1]!)), 'the member to be marked fail', 3000);
    expect(await cli(ports[0]!, 'CLUSTER', 'NODES')).toMatch(/master,fail - 0 \d+ \d+ disconnected/);
    await victim.restart();
    await waitFor(async () => (await slotsByPort(ports[2]!)).has(ports[1]!), 'the member to be back with slots', 10_000, 50);
    for (let i = 0; i < 20; i++) expect(await cli(ports[1]!, 'GET', `cli:${i}`)).toBe(`x${i}`);
  }, 40_000);

  it('a paused member (SIGSTOP) is marked fail by its silence within 3 s and joins again after SIGCONT', async () => {
    const victim = fleet[2]!;
    victim.pause();
    const pausedAt = Date.now();
    try {
      await waitFor(async () => !(await slotsByPort(ports[0]!)).has(ports[2]!), 'the paused member\'s slots to move', 3000, 20);
      const after = Date.now() - pausedAt;
      expect(after).toBeLessThan(3000);
      // Each member judges on its own checks (jittered): the other one too, within 3 s of the pause.
      await waitFor(async () => /master,fail/.test(await nodeLine(ports[1]!, ports[2]!)), 'the other member to mark it fail', Math.max(50, 3000 - (Date.now() - pausedAt)), 20);
    } finally {
      victim.resume();
    }
    await waitFor(async () => /master,fail/.test(await nodeLine(ports[0]!, ports[2]!)) === false, 'the member to answer again', 5000);
    // Joining: no slots until it answered for its hold (2 s here, doubled after repeated fails).
    expect((await slotsByPort(ports[0]!)).has(ports[2]!)).toBe(false);
    await waitFor(async () => (await slotsByPort(ports[0]!)).has(ports[2]!), 'its slots back', 15_000, 50);
  }, 40_000);
});
