import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';

const run = promisify(execFile);

/** valkey-cli reading commands from stdin (one per line), as a user pipes a script into it. */
function cliScript(port: number, lines: string[], extra: string[] = []): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('valkey-cli', ['-p', String(port), ...extra], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d.toString()));
    child.on('error', reject);
    child.on('close', () => resolve(out));
    child.stdin.end(lines.join('\n') + '\n');
  });
}

describe('valkey-cli through respool in front of a 3+3 cluster: transactions, blocking, pub/sub', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    proxy = await startTestProxy([{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }]);
  });

  afterAll(async () => {
    await proxy?.close();
    await cluster?.stop();
  });

  it('MULTI … EXEC and WATCH from a piped script', async () => {
    const out = await cliScript(proxy.address.port, [
      'MULTI', 'SET {cli}a 1', 'INCR {cli}a', 'GET {cli}a', 'EXEC',
      'WATCH {cli}w', 'MULTI', 'SET {cli}w x', 'EXEC',
    ]);
    expect(out.split('\n').filter((l) => l !== '')).toEqual(['OK', 'QUEUED', 'QUEUED', 'QUEUED', 'OK', '2', '2', 'OK', 'OK', 'QUEUED', 'OK']);
  });

  it('BLPOP: nil at its timeout, the value when pushed', async () => {
    const started = Date.now();
    const { stdout } = await run('valkey-cli', ['-p', String(proxy.address.port), 'BLPOP', 'cli:q', '0.3']);
    expect(stdout.trim()).toBe('');
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    const waiting = run('valkey-cli', ['-p', String(proxy.address.port), 'BLPOP', 'cli:q', '0']);
    await new Promise((r) => setTimeout(r, 200));
    await run('valkey-cli', ['-p', String(proxy.address.port), 'RPUSH', 'cli:q', 'v']);
    expect((await waiting).stdout.trim().split('\n')).toEqual(['cli:q', 'v']);
  });

  it('SUBSCRIBE: valkey-cli prints the confirmation, then each message published', async () => {
    const sub = spawn('valkey-cli', ['-p', String(proxy.address.port), 'SUBSCRIBE', 'cli:ch'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    sub.stdout.on('data', (d) => (out += d.toString()));
    try {
      const until = async (cond: () => boolean) => {
        const deadline = Date.now() + 5000;
        while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      };
      await until(() => out.includes('cli:ch'));
      const { stdout } = await run('valkey-cli', ['-p', String(proxy.address.port), 'PUBLISH', 'cli:ch', 'hello']);
      expect(stdout.trim()).toBe('1');
      await until(() => out.includes('hello'));
      expect(out.split('\n').filter((l) => l !== '')).toEqual(['subscribe', 'cli:ch', '1', 'message', 'cli:ch', 'hello']);
    } finally {
      sub.kill(); // this test's own child, by its handle
    }
  });
  it('valkey-cli --replica: a full resync, then every primary\'s writes', async () => {
    const replica = spawn('valkey-cli', ['-p', String(proxy.address.port), '--replica'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    replica.stdout.on('data', (d) => (out += d.toString()));
    replica.stderr.on('data', (d) => (out += d.toString()));
    const until = async (cond: () => boolean, what: string) => {
      const deadline = Date.now() + 10_000;
      while (!cond()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; valkey-cli printed:\n${out}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    try {
      await until(() => out.includes('Logging commands from primary'), 'the resync');
      const keys = ['cli:r1', 'cli:r2', 'cli:r3', 'cli:r4']; // spread over the primaries
      for (const k of keys) await run('valkey-cli', ['-p', String(proxy.address.port), 'SET', k, 'v']);
      await until(() => keys.every((k) => out.toLowerCase().includes(`"set","${k}","v"`)), 'the writes');
    } finally {
      replica.kill();
    }
  });
});
