/**
 * A namespace's FLUSHDB with `--workers 2` (handlers/namespace-scope.ts, workers/peer-broadcast.ts):
 * a tracking client of the namespace on the other worker gets one "invalidate everything", as from
 * one server's flush — not one invalidation per key removed — like one on the flushing worker.
 * One valkey-server is the oracle: the same exchange, the same pushes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { oracleFlushPushes, pushesUntilQuiet, trackingReader } from '../helpers/tracking-reader.js';
import { RESPOOL_BIN as BIN } from '../helpers/respool-cli.js';
import { pidServing } from '../helpers/serving-pids.js';
import { until } from '../helpers/wait.js';

const KEYS = Array.from({ length: 20 }, (_, i) => `k${i}`);

describe('a namespace\'s flush with workers: one invalidation on every worker', () => {
  let oracle: ValkeyNode;
  let server: ValkeyNode;
  let child: ChildProcess;
  let port: number;
  let dir: string;

  beforeAll(async () => {
    [oracle, server] = await Promise.all([startStandalone(), startStandalone()]);
    port = await freePort();
    dir = mkdtempSync(join(tmpdir(), 'respool-ns-flush-'));
    const config = join(dir, 'respool.yaml');
    writeFileSync(config, 'users:\n  - { name: default, password: adminpw }\n  - { name: a, password: pa, keyPrefix: "a:" }\n');
    child = spawn('node', [BIN, '--workers', '2', '--config', config, '--listen', `127.0.0.1:${port}`, '--upstream', `127.0.0.1:${server.port}`, '--log-level', 'warn'], { stdio: 'ignore' });
    // With users configured the default user has a password: each connection signs in before INFO.
    const workerPids = async () => {
      const pids = new Set<number>();
      for (let i = 0; i < 4; i++) {
        const c = await RawConnection.connect(port);
        try {
          expect(await c.call('AUTH', 'adminpw')).toBe('+OK\r\n');
          pids.add(await pidServing(c));
        } finally {
          c.close();
        }
      }
      return pids;
    };
    await until('two workers serving', async () => ((await workerPids().catch(() => new Set())).size === 2 ? true : undefined), 30_000);
  }, 60_000);

  afterAll(async () => {
    if (child?.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    await Promise.all([oracle?.stop(), server?.stop()]);
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('FLUSHDB through one worker: the namespace\'s tracking client on the other gets the oracle\'s one push', async () => {
    // The oracle: a tracking client read the keys, another client flushes.
    const want = await oracleFlushPushes(oracle.port, KEYS);

    // Through respool: the flusher and a reader of namespace a on different workers.
    const flusher = await RawConnection.connect(port);
    expect(await flusher.call('AUTH', 'a', 'pa')).toBe('+OK\r\n');
    for (const key of KEYS) await flusher.call('SET', key, '1');
    const flusherPid = await pidServing(flusher);
    let reader: RawConnection | null = null;
    for (let i = 0; i < 10 && reader === null; i++) {
      const c = await trackingReader(port, ['a', 'pa'], KEYS);
      if ((await pidServing(c)) !== flusherPid) reader = c;
      else c.close();
    }
    expect(reader, 'a reader on the other worker').not.toBeNull();
    // And one on the flusher's own worker (already one push: as before).
    expect(await flusher.call('FLUSHDB')).toBe('+OK\r\n');
    expect(await pushesUntilQuiet(reader!)).toEqual(want);
    expect(await flusher.call('DBSIZE')).toBe(':0\r\n');
    reader!.close();
    flusher.close();
  }, 60_000);
});
