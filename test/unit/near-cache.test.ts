/**
 * The near cache's rules (nearcache/near-cache.ts) with a stand-in tracking connection whose
 * replies the test sends when it likes: a fill that races a write is not kept, reads of a key
 * whose fill is in flight share it, invalidations and a lost connection drop entries, and the
 * store keeps its byte, TTL and age bounds.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { NearCache, type CacheWaiter } from '../../src/nearcache/near-cache.js';
import { CacheStore, ENTRY_OVERHEAD } from '../../src/nearcache/cache-store.js';
import { ReadCoalescing } from '../../src/nearcache/read-coalescing.js';
import type { LinkRequest } from '../../src/upstream/link-request.js';
import type { LeasePools } from '../../src/upstream/lease-pools.js';
import type { Topology } from '../../src/cluster/topology.js';

class FakeConnection extends EventEmitter {
  readonly sent: Array<{ command: string; req: LinkRequest }> = [];
  onPush: ((frame: Buffer) => void) | null = null;
  setDeadline(): void {}
  send(raw: Buffer, req: LinkRequest): void {
    const command = raw.toString('latin1').split('\r\n').filter((_, i) => i % 2 === 0 && i > 0).join(' ');
    if (command.startsWith('CLIENT TRACKING')) req.onReply(Buffer.from('+OK\r\n'), null as never);
    else this.sent.push({ command, req });
  }
  /** Answers the oldest request not answered yet. */
  reply(frame: string): void {
    this.sent.shift()!.req.onReply(Buffer.from(frame), null as never);
  }
}

const immediate = () => new Promise<void>((r) => setImmediate(r));

async function setup(now = () => 1000, confirm = false) {
  const conn = new FakeConnection();
  const dedicated = { acquire: async () => conn, release: () => {} } as unknown as LeasePools;
  const topology = { mode: 'standalone', shards: [{ primary: { address: '127.0.0.1:7000' } }] } as unknown as Topology;
  const cache = new NearCache({ keys: ['c:*'], hot: false, maxBytes: 1 << 20, maxEntryBytes: 1 << 16, maxAgeMs: 0 }, { dedicated, topology: () => topology, commandMs: () => 1000, log: pino({ level: 'silent' }), now, confirm });
  const answers: string[] = [];
  const passed: string[] = [];
  const waiter = (kind: CacheWaiter['kind'] = 'get', protocol: 2 | 3 = 2, fields: string[] = []): CacheWaiter => ({
    kind,
    fields: fields.map((f) => Buffer.from(f)),
    protocol,
    answer: (reply) => answers.push(reply.toString('latin1')),
    passOn: () => passed.push(kind),
  });
  const key = Buffer.from('c:k');
  // The first read opens the tracking connection, and its fill waits for it.
  expect(cache.read(0, Buffer.from('c:warm'), waiter())).toBe(true);
  await immediate();
  await immediate();
  expect(conn.sent.map((s) => s.command)).toEqual(['GET c:warm', 'PTTL c:warm']);
  conn.reply('-LOADING warming up\r\n'); // not kept: the read goes to the node
  conn.reply(':-2\r\n');
  expect(passed).toEqual(['get']);
  passed.length = 0;
  return { cache, conn, answers, passed, waiter, key };
}

describe('near cache', () => {
  it('a fill that a write overtook is answered to the reads before the write, and not kept', async () => {
    const { cache, conn, answers, waiter, key } = await setup();
    cache.read(0, key, waiter());
    await immediate();
    expect(conn.sent.map((s) => s.command)).toEqual(['GET c:k', 'PTTL c:k']);
    const mark = cache.beginWrite(0, [key])!;
    conn.reply('$3\r\nold\r\n');
    conn.reply(':-1\r\n');
    expect(answers).toEqual(['$3\r\nold\r\n']);
    expect(cache.stats()['entries']).toBe(0);
    // While the write is in flight a read goes to the node (behind the write on its link): a fill
    // on the tracking connection could run before the write and answer the value before it.
    expect(cache.read(0, key, waiter())).toBe(false);
    expect(conn.sent).toHaveLength(0);
    cache.endWrite(mark);
    cache.read(0, key, waiter());
    await immediate();
    conn.reply('$3\r\nnew\r\n');
    conn.reply(':-1\r\n');
    expect(cache.stats()['entries']).toBe(1);
    cache.read(0, key, waiter('strlen'));
    cache.read(0, key, waiter('exists'));
    await immediate();
    expect(answers.slice(-3)).toEqual(['$3\r\nnew\r\n', ':3\r\n', ':1\r\n']);
    expect(conn.sent).toHaveLength(0);
  });

  it('confirm: a hit waits for a PING, and an invalidation that came before the PONG makes it a miss', async () => {
    const { cache, conn, answers, waiter, key } = await setup(() => 1000, true);
    cache.read(0, key, waiter());
    await immediate();
    expect(conn.sent.map((s) => s.command)).toEqual(['PING']); // the first read's batch is confirmed too
    conn.reply('+PONG\r\n');
    conn.reply('$1\r\nv\r\n');
    conn.reply(':-1\r\n');
    expect(answers).toEqual(['$1\r\nv\r\n']);
    cache.read(0, key, waiter());
    await immediate();
    expect(conn.sent.map((s) => s.command)).toEqual(['PING']);
    expect(answers).toHaveLength(1); // held until the PONG
    conn.onPush!(Buffer.from('>2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nc:k\r\n'));
    conn.reply('+PONG\r\n');
    expect(conn.sent.map((s) => s.command)).toEqual(['GET c:k', 'PTTL c:k']); // the entry went: a new fill
    conn.reply('$1\r\nw\r\n');
    conn.reply(':-1\r\n');
    expect(answers).toEqual(['$1\r\nv\r\n', '$1\r\nw\r\n']);
    expect(cache.stats()['confirms']).toBe(2);
  });

  it('reads of a key whose fill is in flight share its one node read', async () => {
    const { cache, conn, answers, waiter, key } = await setup();
    for (let i = 0; i < 5; i++) cache.read(0, key, waiter('get', i % 2 === 0 ? 2 : 3));
    await immediate();
    cache.read(0, key, waiter());
    await immediate();
    expect(conn.sent.map((s) => s.command)).toEqual(['GET c:k', 'PTTL c:k']);
    conn.reply('_\r\n');
    conn.reply(':-2\r\n');
    expect(answers).toEqual(['$-1\r\n', '_\r\n', '$-1\r\n', '_\r\n', '$-1\r\n', '$-1\r\n']);
    expect(cache.stats()).toMatchObject({ fills: 2, coalesced: 5, entries: 1 });
  });

  it('an invalidation drops the keys it names, a null one and a lost connection every key of the node', async () => {
    const { cache, conn, waiter } = await setup();
    for (const k of ['c:a', 'c:b']) {
      cache.read(0, Buffer.from(k), waiter());
      await immediate();
      conn.reply('$1\r\nv\r\n');
      conn.reply(':-1\r\n');
    }
    expect(cache.stats()['entries']).toBe(2);
    conn.onPush!(Buffer.from('>2\r\n$10\r\ninvalidate\r\n*1\r\n$3\r\nc:a\r\n'));
    expect(cache.recentEntries(10).map((e) => e.key.toString())).toEqual(['c:b']);
    conn.onPush!(Buffer.from('>2\r\n$10\r\ninvalidate\r\n_\r\n'));
    expect(cache.stats()['entries']).toBe(0);
    cache.read(0, Buffer.from('c:a'), waiter());
    await immediate();
    conn.reply('$1\r\nv\r\n');
    conn.reply(':-1\r\n');
    expect(cache.stats()['entries']).toBe(1);
    conn.emit('close', 'gone');
    expect(cache.stats()['entries']).toBe(0);
  });

  it('a WRONGTYPE answers GET and STRLEN; EXISTS and every other error go to the node', async () => {
    const { cache, conn, answers, passed, waiter, key } = await setup();
    for (const kind of ['get', 'strlen', 'exists'] as const) cache.read(0, key, waiter(kind));
    await immediate();
    conn.reply('-WRONGTYPE Operation against a key holding the wrong kind of value\r\n');
    conn.reply(':-1\r\n');
    expect(answers).toHaveLength(2);
    expect(passed).toEqual(['exists']);
    cache.read(0, key, waiter());
    await immediate();
    conn.reply('-MOVED 1 127.0.0.1:7001\r\n');
    conn.reply('-MOVED 1 127.0.0.1:7001\r\n');
    expect(passed).toEqual(['exists', 'get']);
    expect(cache.stats()['entries']).toBe(0);
  });
});

describe('cached values', () => {
  it('a hash read with HGETALL answers every hash read; a string read asks the node for the hash reads', async () => {
    const { cache, conn, answers, passed, waiter, key } = await setup();
    cache.read(0, key, waiter('hget', 3, ['b']));
    cache.read(0, key, waiter('get'));
    await immediate();
    expect(conn.sent.map((s) => s.command)).toEqual(['HGETALL c:k', 'PTTL c:k']);
    conn.reply('%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n22\r\n');
    conn.reply(':-1\r\n');
    expect(answers).toEqual(['$2\r\n22\r\n', '-WRONGTYPE Operation against a key holding the wrong kind of value\r\n']);
    answers.length = 0;
    const reads: Array<[CacheWaiter['kind'], 2 | 3, string[]]> = [
      ['hgetall', 2, []], ['hgetall', 3, []], ['hmget', 2, ['a', 'x', 'b']], ['hmget', 3, ['x']], ['hlen', 2, []],
      ['hexists', 2, ['a']], ['hexists', 2, ['x']], ['hstrlen', 2, ['b']], ['hstrlen', 2, ['x']], ['strlen', 2, []], ['exists', 3, []],
    ];
    for (const [kind, proto, fields] of reads) cache.read(0, key, waiter(kind, proto, fields));
    await immediate();
    expect(answers).toEqual([
      '*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n22\r\n',
      '%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$2\r\n22\r\n',
      '*3\r\n$1\r\n1\r\n$-1\r\n$2\r\n22\r\n',
      '*1\r\n_\r\n',
      ':2\r\n', ':1\r\n', ':0\r\n', ':2\r\n', ':0\r\n',
      '-WRONGTYPE Operation against a key holding the wrong kind of value\r\n',
      ':1\r\n',
    ]);
    expect(passed).toEqual([]);
    expect(conn.sent).toHaveLength(0);
  });
});

describe('cache store', () => {
  const entry = (key: string, value: string, fields: { expiresAt?: number; filledAt?: number } = {}) => ({
    key: Buffer.from(key), db: 0, node: 'n', value: { type: 'string' as const, frame: Buffer.from(`$${value.length}\r\n${value}\r\n`) }, expiresAt: fields.expiresAt ?? 0, filledAt: fields.filledAt ?? 0,
  });

  it('holds at most maxBytes, evicting the least recently used first', () => {
    const size = 1 + 9 + ENTRY_OVERHEAD; // "k" + "$3\r\nvvv\r\n"
    const store = new CacheStore({ maxBytes: size * 3, maxEntryBytes: size * 3, maxAgeMs: 0 });
    for (const k of ['a', 'b', 'c']) store.put(entry(k, 'vvv'));
    store.get(0, Buffer.from('a'), 0); // a is now the most recently used
    store.put(entry('d', 'vvv'));
    expect([...store.values()].map((e) => e.key.toString())).toEqual(['c', 'a', 'd']);
    expect(store.bytes).toBe(size * 3);
    expect(store.evictions).toBe(1);
    expect(store.put(entry('e', 'v'.repeat(size * 3)))).toBe(false); // over maxEntryBytes: never stored
  });

  it('serves an entry neither past its TTL nor past maxAgeMs', () => {
    const store = new CacheStore({ maxBytes: 1 << 20, maxEntryBytes: 1 << 20, maxAgeMs: 100 });
    store.put(entry('ttl', 'v', { expiresAt: 50, filledAt: 0 }));
    store.put(entry('age', 'v', { filledAt: 0 }));
    expect(store.get(0, Buffer.from('ttl'), 49)).toBeDefined();
    expect(store.get(0, Buffer.from('ttl'), 50)).toBeUndefined();
    expect(store.get(0, Buffer.from('age'), 99)).toBeDefined();
    expect(store.get(0, Buffer.from('age'), 100)).toBeUndefined();
    expect(store.size).toBe(0);
  });
});

describe('read coalescing', () => {
  const owner = (log: string[], name: string) => ({ client: { id: 1, protocol: 2 as const, db: 0, identity: null, closed: false }, onCallDone: (reply: Buffer) => log.push(`${name}:${reply.toString()}`) });

  it('joins a twin in flight; a write detaches it, and the twin that replaces it is not undone by the first one\'s end', () => {
    const c = new ReadCoalescing();
    const log: string[] = [];
    const first = c.lead('id', 'k', owner(log, 'a'));
    expect(c.join('id', owner(log, 'b'))).toBe(true);
    c.forget('k'); // a write of k is sent: reads after it do not join reads before it
    expect(c.join('id', owner(log, 'c'))).toBe(false);
    const second = c.lead('id', 'k', owner(log, 'c'));
    first.onCallDone(Buffer.from('old'), 0);
    expect(log).toEqual(['b:old', 'a:old']);
    expect(c.join('id', owner(log, 'd'))).toBe(true); // the second is still in flight
    c.forget('k');
    expect(c.join('id', owner(log, 'e'))).toBe(false); // and a later write still detaches it
    second.onCallDone(Buffer.from('new'), 0);
    expect(log).toEqual(['b:old', 'a:old', 'd:new', 'c:new']);
    expect(c.joined).toBe(2);
  });
});
