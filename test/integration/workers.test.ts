/**
 * `--workers 2`: a supervisor and two respool processes sharing the listen socket (src/workers),
 * spawned from the compiled bin in front of a real valkey-server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort, startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { RESPOOL_BIN as BIN } from '../helpers/respool-cli.js';
import { pidServing, servingPid, servingPids } from '../helpers/serving-pids.js';
import { sleep, until } from '../helpers/wait.js';
import calculateSlot from 'cluster-key-slot';


/** `--workers 2` in front of the cluster `seed` belongs to, with `extra` flags; resolves once both workers serve. */
async function startTwoWorkers(seed: ValkeyNode, extra: string[]): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn('node', [BIN, '--workers', '2', '--listen', `127.0.0.1:${port}`, '--upstream', `${seed.host}:${seed.port}`, '--log-level', 'warn', ...extra], { stdio: 'ignore' });
  await until('two workers serving', async () => ((await servingPids(port, 4)).size === 2 ? true : undefined));
  return { child, port };
}

describe('workers: 2 processes share the listen socket; the supervisor sums metrics and replaces a crashed worker', () => {
  let server: ValkeyNode;
  let child: ChildProcess;
  let port: number;
  let adminPort: number;
  let stderr = '';

  beforeAll(async () => {
    server = await startStandalone();
    port = await freePort();
    adminPort = await freePort();
    child = spawn('node', [BIN, '--workers', '2', '--listen', `127.0.0.1:${port}`, '--admin', `127.0.0.1:${adminPort}`, '--upstream', `127.0.0.1:${server.port}`, '--log-level', 'warn'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, RESPOOL_ADMIN_TOKEN: 'workers-test-token-0123456789' },
    });
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout!.on('data', (d: Buffer) => (stderr += d.toString()));
    await until('both workers ready', async () => {
      const res = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
      return res.status === 200 ? true : undefined;
    });
  }, 30_000);

  afterAll(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
    await server?.stop();
  });

  it('spreads clients over both workers and sums their metrics', async () => {
    const conns = await Promise.all(Array.from({ length: 6 }, () => RawConnection.connect(port)));
    try {
      const pids = new Set<number>();
      for (const c of conns) pids.add(await pidServing(c));
      expect(pids.size).toBe(2);
      expect(pids.has(child.pid!)).toBe(false); // the supervisor serves no client itself
      expect(await conns[0]!.call('SET', 'workers:k', 'v')).toBe('+OK\r\n');
      expect(await conns[5]!.call('GET', 'workers:k')).toBe('$1\r\nv\r\n');
      const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
      // Both workers' gauges, summed: the 6 open clients.
      expect(metrics).toMatch(/^respool_client_connections 6$/m);
      expect((await fetch(`http://127.0.0.1:${adminPort}/topology`)).status).toBe(200); // a worker's, through the supervisor
      // A mutation without the token is refused by the workers (the supervisor passes the header on).
      expect((await fetch(`http://127.0.0.1:${adminPort}/hotkeys/split`, { method: 'POST', body: '{}' })).status).toBe(401);
    } finally {
      for (const c of conns) c.close();
    }
  });

  it('an ACL SETUSER / DELUSER on one worker applies on every worker, and a replacement worker gets it', async () => {
    const admin = await RawConnection.connect(port);
    expect(await admin.call('ACL', 'SETUSER', 'wuser', 'on', '>wpw', '~w:*', '+get', '+set', '+info')).toBe('+OK\r\n');
    const pids = new Set<number>();
    const conns = await Promise.all(Array.from({ length: 6 }, () => RawConnection.connect(port)));
    for (const c of conns) {
      expect(await c.call('AUTH', 'wuser', 'wpw')).toBe('+OK\r\n');
      expect(await c.call('SET', 'other', 'x')).toBe('-NOPERM No permissions to access a key\r\n');
      pids.add(await pidServing(c));
    }
    expect(pids.size).toBe(2); // both workers know the user
    expect(await admin.call('ACL', 'DELUSER', 'wuser')).toBe(':1\r\n');
    for (const c of conns) await c.waitClosed();
    const again = await RawConnection.connect(port);
    expect(await again.call('AUTH', 'wuser', 'wpw')).toMatch(/^-WRONGPASS/);
    again.close();
    expect(await admin.call('ACL', 'SETUSER', 'wuser2', 'on', '>w2', '+@all', '~*', '&*')).toBe('+OK\r\n');
    admin.close();
  });

  it('replaces a worker that crashed; clients are served meanwhile by the other', async () => {
    const before = await servingPids(port, 6);
    const victim = [...before][0]!;
    process.kill(victim, 'SIGKILL');
    // New connections keep being served; soon two workers again, the victim not among them.
    const after = await until('a replacement worker', async () => {
      const pids = await servingPids(port, 6);
      return pids.size === 2 && !pids.has(victim) ? pids : undefined;
    });
    expect([...after].filter((p) => !before.has(p))).toHaveLength(1);
    expect(stderr).toMatch(/worker exited; replacing it/);
    // The replacement got the ACL changes made before it started (the test above).
    for (let i = 0; i < 6; i++) {
      const c = await RawConnection.connect(port);
      expect(await c.call('AUTH', 'wuser2', 'w2')).toBe('+OK\r\n');
      expect(await c.call('AUTH', 'wuser', 'wpw')).toMatch(/^-WRONGPASS/);
      c.close();
    }
  }, 30_000);

  it('drains every worker and exits 0 on SIGTERM', async () => {
    const pids = await servingPids(port, 4);
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow(); // gone
  }, 30_000);
});

describe('workers in front of a cluster: RESPOOL SPLIT changes and hot-key reports span every worker', () => {
  let cluster: ValkeyCluster;
  let child: ChildProcess;
  let port: number;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    ({ child, port } = await startTwoWorkers(cluster.nodes[0]!, ['--hot-keys-sample-rate', '1', '--hot-keys-window', '30s']));
  }, 60_000);

  afterAll(async () => {
    if (child?.exitCode === null) child.kill('SIGKILL');
    await cluster?.stop();
  });

  it('ADD on one worker shows in LIST on the other; DEL there removes it on the first', async () => {
    // Two connections served by different workers.
    const byPid = new Map<number, RawConnection>();
    const spare: RawConnection[] = [];
    for (let i = 0; i < 8 && byPid.size < 2; i++) {
      const c = await RawConnection.connect(port);
      const pid = await pidServing(c);
      if (byPid.has(pid)) spare.push(c);
      else byPid.set(pid, c);
    }
    const [a, b] = [...byPid.values()];
    try {
      expect(b).toBeDefined();
      expect(await a!.call('RESPOOL', 'SPLIT', 'ADD', 'wk:hot', '3')).toMatch(/^\+OK|^\*|^:/);
      await until('the rule on the other worker', async () => ((await b!.call('RESPOOL', 'SPLIT', 'LIST')).includes('wk:hot') ? true : undefined), 5000);
      expect(await b!.call('RESPOOL', 'SPLIT', 'DEL', 'wk:hot')).not.toMatch(/^-/);
      await until('the rule gone on the first worker', async () => (!(await a!.call('RESPOOL', 'SPLIT', 'LIST')).includes('wk:hot') ? true : undefined), 5000);
      // Hot keys: a key read only through worker B is in RESPOOL HOTKEYS asked on worker A.
      for (let i = 0; i < 40; i++) await b!.call('GET', 'wk:only-on-b');
      expect(await a!.call('RESPOOL', 'HOTKEYS', 'CURRENT')).toContain('wk:only-on-b');
      expect(await a!.call('RESPOOL', 'NODES', 'CURRENT')).toMatch(/^\*3\r\n/); // the 3 primaries
    } finally {
      for (const c of [...byPid.values(), ...spare]) c.close();
    }
  });

  it('a replacement worker gets the split changes made before it started', async () => {
    const c = await RawConnection.connect(port);
    expect(await c.call('RESPOOL', 'SPLIT', 'ADD', 'wk:kept', '2')).toBe('+OK\r\n');
    const owner = await pidServing(c);
    c.close();
    const other = await until('a connection on the other worker', async () => {
      const pid = await servingPid(port);
      return pid !== owner ? pid : undefined;
    });
    process.kill(other, 'SIGKILL');
    // A connection served by the replacement (neither the owner nor the killed one) sees the rule.
    const list = await until('the replacement worker, with the rule', async () => {
      const conn = await RawConnection.connect(port);
      try {
        const pid = await pidServing(conn);
        if (pid === owner || pid === other) return undefined;
        return await conn.call('RESPOOL', 'SPLIT', 'LIST');
      } finally {
        conn.close();
      }
    }, 20_000);
    expect(list).toContain('wk:kept');
  }, 30_000);
});

describe('workers with the fleet\'s shared state (--fleet-state upstream): every worker is a member of it', () => {
  let cluster: ValkeyCluster;
  let child: ChildProcess;
  let port: number;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    ({ child, port } = await startTwoWorkers(cluster.nodes[0]!, ['--fleet-state', 'upstream']));
  }, 60_000);

  afterAll(async () => {
    if (child?.exitCode === null) child.kill('SIGKILL');
    await cluster?.stop();
  });

  it('each worker registers; a split added through one is in force on both before OK; a replacement reads it from the state', async () => {
    const members = async () => {
      const owner = await cluster.primaryForSlot(calculateSlot('{respool-fleet}'));
      return ((await cluster.call(owner, 'HKEYS', '{respool-fleet}:members')) as string[]).sort();
    };
    await until('both workers registered', async () => ((await members()).length === 2 ? true : undefined));
    expect(await members()).toEqual([`127.0.0.1:${port}#w0`, `127.0.0.1:${port}#w1`]);
    const c = await RawConnection.connect(port);
    expect(await c.call('SET', 'wkf:hot', 'v1')).toBe('+OK\r\n');
    expect(await c.call('RESPOOL', 'SPLIT', 'ADD', 'wkf:hot', '3')).toBe('+OK\r\n');
    c.close();
    // Every connection, whichever worker serves it, knows the split and reads the value.
    for (let i = 0; i < 6; i++) {
      const conn = await RawConnection.connect(port);
      expect(await conn.call('RESPOOL', 'SPLIT', 'LIST')).toContain('wkf:hot');
      expect(await conn.call('GET', 'wkf:hot')).toBe('$2\r\nv1\r\n');
      conn.close();
    }
    const victim = await servingPid(port);
    process.kill(victim, 'SIGKILL');
    const list = await until('the replacement worker, with the rule', async () => {
      const conn = await RawConnection.connect(port);
      try {
        const pid = await pidServing(conn);
        if (pid === victim) return undefined;
        const l = await conn.call('RESPOOL', 'SPLIT', 'LIST');
        return l.includes('wkf:hot') ? l : undefined;
      } finally {
        conn.close();
      }
    }, 20_000);
    expect(list).toContain('wkf:hot');
  }, 40_000);
});
