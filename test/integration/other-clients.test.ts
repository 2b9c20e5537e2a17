/**
 * The clients users run in other languages, as Debian packages them, drive respool the way an
 * application written for one server does: redis-py, redis-rb and phpredis each run the fixed
 * scenario of their script in test/clients/ (strings with binary and 100 KB values, multi-key
 * commands over several slots, the data types, a pipeline, MULTI/EXEC and WATCH, an error reply,
 * EVAL, SCAN, pub/sub, BLPOP, the client name) and print what the client returned. Here every
 * item is asserted exactly, through respool in front of a cluster and of a standalone server, and
 * directly against one valkey-server — the oracle the expected values are written from.
 *
 * The clients are not skipped when missing: CI installs them (`npm run setup` runs
 * scripts/install-valkey.sh --with-test-clients), so a missing one is a failure.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import calculateSlot from 'cluster-key-slot';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

type Expected = Record<string, unknown>;

interface OtherClient {
  name: string;
  /** Short tag for key prefixes. */
  tag: string;
  command: string;
  script: string;
  /** What this client returns for the scenario run with `p` as the key prefix, where it differs by client. */
  own(p: string): Expected;
}

/** The pipeline's 50 replies: SET pipe:i for even i (answered as `ok`), then GET of that key. */
const pipelineReplies = (ok: unknown): unknown[] => Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? ok : `v${i - 1}`));
const mgetValues = ['v1', 'v2', 'v3', 'v4', 'v5', 'v6'];
const bigValue = Buffer.from(Array.from({ length: 100 * 1024 }, (_, i) => i % 256));

/** What every client returns alike (strings, integers, arrays of strings). */
function shared(p: string): Expected {
  return {
    client_getname: `${p}-app`,
    get: 'hello',
    get_binary_hex: Buffer.from('a\r\nb\x00c\r\n', 'latin1').toString('hex'),
    get_big: { length: bigValue.length, sha256: createHash('sha256').update(bigValue).digest('hex') },
    incr: [1, 2],
    del: 6,
    // EXPIRE 1000, then TTL: 999 only if half a second passed in between
    ttl: expect.toBeOneOf([999, 1000]),
    hgetall: { f1: 'v1', f2: 'v2', f3: 'v3' },
    rpush: 3,
    lrange: ['a', 'b', 'c'],
    sadd: 3,
    smembers: ['x', 'y', 'z'],
    zadd: 3,
    watched_after: 'changed',
    eval: [`${p}:lua`, 'from-lua', 8],
    scan: Array.from({ length: 20 }, (_, i) => `${p}:scan:${i}`).sort(),
    publish: 1,
    blpop: [`${p}:queue`, 'job-1'],
  };
}

const CLIENTS: OtherClient[] = [
  {
    name: 'redis-py',
    tag: 'py',
    // Debian's python3-redis is installed for the system python; a PATH python may be a pyenv shim without it.
    command: '/usr/bin/python3',
    script: 'test/clients/redis-py.py',
    own: (p) => ({
      client: 'redis-py 4.3.4',
      ping: true,
      client_info: { name: `${p}-app`, db: 0, multi: -1 },
      set: true,
      get_missing: null,
      set_binary: true,
      set_big: true,
      mset: true,
      mget: [...mgetValues, null],
      mget_after_del: Array(6).fill(null),
      expire: true,
      hset: 3,
      zrange_withscores: [['a', 1], ['b', 2.5], ['c', 3]],
      pipeline: pipelineReplies(true),
      multi_exec: [true, 1, 1, '1'],
      watch_exec: { error: 'WatchError', message: 'Watched variable changed.' },
      // redis-py drops the "ERR " prefix of the error reply
      incr_error: { error: 'ResponseError', message: 'value is not an integer or out of range' },
      ping_after_error: true,
      subscribe: { type: 'subscribe', pattern: null, channel: `${p}:chan`, data: 1 },
      message: { type: 'message', pattern: null, channel: `${p}:chan`, data: 'hello\r\nworld' },
    }),
  },
  {
    name: 'redis-rb',
    tag: 'rb',
    command: 'ruby',
    script: 'test/clients/redis-rb.rb',
    own: (p) => ({
      client: 'redis-rb 4.8.0',
      ping: 'PONG',
      set: 'OK',
      get_missing: null,
      set_binary: 'OK',
      set_big: 'OK',
      mset: 'OK',
      mget: [...mgetValues, null],
      mget_after_del: Array(6).fill(null),
      expire: true,
      hset: 3,
      zrange_withscores: [['a', 1], ['b', 2.5], ['c', 3]],
      pipeline: pipelineReplies('OK'),
      multi_exec: ['OK', 1, 1, '1'],
      watch_exec: null,
      incr_error: { error: 'Redis::CommandError', message: 'ERR value is not an integer or out of range' },
      ping_after_error: 'PONG',
      subscribe: [`${p}:chan`, 1],
      message: [`${p}:chan`, 'hello\r\nworld'],
    }),
  },
  {
    name: 'phpredis',
    tag: 'php',
    command: 'php',
    script: 'test/clients/phpredis.php',
    own: (p) => ({
      client: 'phpredis 5.3.7',
      ping: true,
      client_setname: true,
      set: true,
      get_missing: false,
      set_binary: true,
      set_big: true,
      mset: true,
      mget: [...mgetValues, false],
      mget_after_del: Array(6).fill(false),
      expire: true,
      hset: true, // HMSET
      zrange_withscores: { a: 1, b: 2.5, c: 3 },
      pipeline: pipelineReplies(true),
      multi_exec: [true, 1, 1, '1'],
      watch_exec: false,
      // phpredis 5.3 keeps the reply line's terminator as a NUL in getLastError() (a real server gives the same)
      incr_error: { result: false, last_error: 'ERR value is not an integer or out of range\u0000' },
      ping_after_error: true,
      message: [`${p}:chan`, 'hello\r\nworld'],
    }),
  },
];

/** Runs `client`'s scenario against host:port with key prefix `p`; the JSON object it printed. */
function runScenario(client: OtherClient, target: { host: string; port: number }, p: string): Promise<Expected> {
  const args = [client.script, target.host, String(target.port), p];
  return new Promise((resolve, reject) => {
    execFile(client.command, args, { cwd: ROOT, timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) {
        const why = `${client.name} scenario failed (${err.message.split('\n')[0]})\n${stderr.trim()}`;
        const hint = `${client.name} is one of the test clients CI installs: bash scripts/install-valkey.sh --with-test-clients`;
        return reject(new Error(`${why}\n${hint}`));
      }
      try {
        resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Expected);
      } catch {
        reject(new Error(`${client.name} printed no JSON object:\n${stdout}\n${stderr}`));
      }
    });
  });
}

const expectedFor = (client: OtherClient, p: string): Expected => ({ ...shared(p), ...client.own(p) });

/** The keys the pipeline wrote and the value each holds. */
const pipelineKeys = (p: string): Array<[string, string]> => Array.from({ length: 25 }, (_, i) => [`${p}:pipe:${2 * i}`, `v${2 * i}`]);

describe('other-language clients through respool in front of a 3-primary, 3-replica cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }]);
  });

  afterAll(async () => {
    await proxy?.close();
    await cluster?.stop();
  });

  /** The primaries owning `keys`' slots, by port. */
  async function owners(keys: string[]): Promise<Set<number>> {
    const nodes = await Promise.all(keys.map((key) => cluster.primaryForSlot(calculateSlot(key))));
    return new Set(nodes.map((n) => n.port));
  }

  /** One command straight to the primary owning `key`'s slot. */
  async function onOwner(key: string, ...args: string[]): Promise<unknown> {
    return cluster.call(await cluster.primaryForSlot(calculateSlot(key)), ...args);
  }

  for (const client of CLIENTS) {
    it(`${client.name}: every scenario item answers as one server does, and the data lands on the nodes owning its slots`, async () => {
      const p = `${client.tag}-cluster`;
      // The multi-key steps really span the shards (else they would prove nothing about slots).
      expect((await owners(mgetValues.map((_, i) => `${p}:m${i + 1}`))).size).toBe(3); // MSET's keys m1…m6
      expect((await owners([`${p}:tx:a`, `${p}:tx:b`, `${p}:tx:c`])).size).toBeGreaterThan(1);

      expect(await runScenario(client, proxy.address, p)).toEqual(expectedFor(client, p));

      // Through respool, not past it: read the scenario's writes from the primary owning each slot.
      const writes: Array<[string, string]> = [...pipelineKeys(p), [`${p}:str`, 'hello'], [`${p}:tx:a`, '1']];
      expect((await owners(writes.map(([key]) => key))).size).toBe(3);
      for (const [key, value] of writes) expect(await onOwner(key, 'GET', key), key).toBe(value);
      expect(await onOwner(`${p}:m1`, 'EXISTS', `${p}:m1`)).toBe(0); // DEL reached the owner too
    });
  }
});

describe('other-language clients through respool in front of a standalone valkey-server', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    server = await startStandalone();
    proxy = await startTestProxy([{ host: server.host, port: server.port }]);
  });

  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
  });

  for (const client of CLIENTS) {
    it(`${client.name}: every scenario item answers as one server does`, async () => {
      const p = `${client.tag}-standalone`;
      expect(await runScenario(client, proxy.address, p)).toEqual(expectedFor(client, p));
      const writes: Array<[string, string]> = [...pipelineKeys(p), [`${p}:str`, 'hello']];
      for (const [key, value] of writes) expect(await server.call('GET', key), key).toBe(value);
    });
  }
});

describe('other-language clients directly against one valkey-server (the oracle of the expected values)', () => {
  let server: ValkeyNode;

  beforeAll(async () => {
    server = await startStandalone();
  });

  afterAll(async () => {
    await server?.stop();
  });

  for (const client of CLIENTS) {
    it(`${client.name}: the scenario's expected values are what valkey-server answers`, async () => {
      const p = `${client.tag}-direct`;
      expect(await runScenario(client, server, p)).toEqual(expectedFor(client, p));
    });
  }
});
