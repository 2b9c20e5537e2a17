import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { parseInfo, rawCall, RawClient, ReplyError, type RespArg, type RespReply } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';

// CLIENT LIST / INFO / KILL / PAUSE / UNPAUSE about respool's own clients, in Valkey 8.0.1's formats.
let server: ValkeyNode;
let proxy: RespoolProxy;
const open: RawClient[] = [];

beforeAll(async () => {
  server = await startStandalone();
  proxy = await startTestProxy([{ host: server.host, port: server.port }]);
});

afterAll(async () => {
  await proxy?.close();
  await server?.stop();
});

afterEach(async () => {
  for (const c of open.splice(0)) c.close();
  await waitFor(async () => proxy.clientCount() === 0, 'every client to be gone');
});

async function client(port = proxy.address.port): Promise<RawClient> {
  const c = await RawClient.connect(port);
  open.push(c);
  return c;
}

const keysOf = (line: string) => line.split(' ').map((kv) => kv.slice(0, kv.indexOf('=')));
/** A direct server's fields less those respool leaves out (no counterpart: client-commands.ts clientInfoLine). */
const field = (line: string, key: string) => line.split(' ').find((kv) => kv.startsWith(`${key}=`))!.slice(key.length + 1);
const lines = (reply: RespReply) => String(reply).split('\n').filter((l) => l !== '');
const errorText = (r: RespReply) => (r instanceof ReplyError ? `ERR:${r.message}` : r);

describe('CLIENT LIST and CLIENT INFO', () => {
  it('one line per respool client (never its upstream links), with a direct server\'s field names in its order', async () => {
    const direct = await client(server.port);
    const directLine = lines(await direct.call('CLIENT', 'INFO'))[0]!;
    const a = await client();
    const b = await client();
    await b.call('CLIENT', 'SETNAME', 'bee');
    await b.call('SET', 'cl:k', 'v'); // respool's links to the server exist now
    const list = lines(await a.call('CLIENT', 'LIST'));
    expect(list).toHaveLength(2);
    for (const line of list) expect(keysOf(line)).toEqual(keysOf(directLine));
    const ids = [await a.call('CLIENT', 'ID'), await b.call('CLIENT', 'ID')].map(String);
    expect(list.map((l) => field(l, 'id'))).toEqual(ids);
    const bLine = list.find((l) => field(l, 'id') === ids[1])!;
    expect(field(bLine, 'name')).toBe('bee');
    expect(field(bLine, 'cmd')).toBe('set');
    expect(field(bLine, 'flags')).toBe('N');
    expect(Number(field(bLine, 'rbs'))).toBeGreaterThanOrEqual(16384); // Valkey 8's reply buffer and its peak
    expect(Number(field(bLine, 'rbp'))).toBeLessThanOrEqual(Number(field(bLine, 'rbs')));
    expect(field(bLine, 'db')).toBe('0');
    expect(field(bLine, 'multi')).toBe('-1');
    expect(field(bLine, 'user')).toBe('default');
    expect(field(bLine, 'addr')).toBe(`${b.socket.localAddress}:${b.socket.localPort}`);
    expect(field(bLine, 'laddr')).toBe(`127.0.0.1:${proxy.address.port}`);
    // CLIENT INFO is the same line (one implementation)
    const info = lines(await b.call('CLIENT', 'INFO'))[0]!;
    expect(keysOf(info)).toEqual(keysOf(directLine));
    expect(field(info, 'id')).toBe(ids[1]);
    expect(field(info, 'cmd')).toBe('client|info');
    // ID filter, in the order asked; unknown ids give nothing
    const byId = lines(await a.call('CLIENT', 'LIST', 'ID', ids[1]!, '999999', ids[0]!));
    expect(byId.map((l) => field(l, 'id'))).toEqual([ids[1], ids[0]]);
    expect(await a.call('CLIENT', 'LIST', 'ID', '999999')).toBe('');
  });

  it('TYPE pubsub lists the subscribers only (flags=P, sub counts), TYPE normal the others', async () => {
    const a = await client();
    const sub = await client();
    await sub.call('SUBSCRIBE', 'cl:ch1', 'cl:ch2');
    await waitFor(() => sub.unsolicited.length >= 1, 'the second subscribe confirmation');
    await sub.call('PSUBSCRIBE', 'cl:*');
    const pubsub = lines(await a.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
    expect(pubsub).toHaveLength(1);
    expect(field(pubsub[0]!, 'flags')).toBe('P');
    expect([field(pubsub[0]!, 'sub'), field(pubsub[0]!, 'psub'), field(pubsub[0]!, 'ssub')]).toEqual(['2', '1', '0']);
    const normal = lines(await a.call('CLIENT', 'LIST', 'TYPE', 'NORMAL'));
    expect(normal.map((l) => field(l, 'id'))).toEqual([String(await a.call('CLIENT', 'ID'))]);
    expect(await a.call('CLIENT', 'LIST', 'TYPE', 'replica')).toBe('');
  });

  it('MULTI shows x and the queued count; answered at EXEC inside a transaction', async () => {
    const a = await client();
    expect(await a.call('MULTI')).toBe('OK');
    expect(await a.call('SET', 'cl:m', '1')).toBe('QUEUED');
    expect(await a.call('CLIENT', 'LIST', 'ID', '1')).toBe('QUEUED');
    const b = await client();
    const line = lines(await b.call('CLIENT', 'LIST', 'TYPE', 'normal')).find((l) => field(l, 'flags') === 'x')!;
    expect(field(line, 'multi')).toBe('2');
    const exec = (await a.call('EXEC')) as RespReply[];
    expect(exec[0]).toBe('OK');
    expect(typeof exec[1]).toBe('string');
  });
});

describe('errors exactly as Valkey 8.0.1', () => {
  it('CLIENT LIST / KILL / PAUSE argument errors', async () => {
    const cases: RespArg[][] = [
      ['CLIENT', 'KILL', '1.2.3.4:5'],
      ['CLIENT', 'KILL', 'ID', '0'],
      ['CLIENT', 'KILL', 'ID', 'abc'],
      ['CLIENT', 'KILL', 'ID', '999999'],
      ['CLIENT', 'KILL', 'MAXAGE', '0'],
      ['CLIENT', 'KILL', 'MAXAGE', 'x'],
      ['CLIENT', 'KILL', 'TYPE', 'foo'],
      ['CLIENT', 'KILL', 'USER', 'nobody'],
      ['CLIENT', 'KILL', 'SKIPME', 'maybe'],
      ['CLIENT', 'KILL', 'foo', 'bar'],
      ['CLIENT', 'KILL', 'ID', '1', 'SKIPME'],
      ['CLIENT', 'KILL'],
      ['CLIENT', 'LIST', 'TYPE', 'foo'],
      ['CLIENT', 'LIST', 'ID', 'x'],
      ['CLIENT', 'LIST', 'foo'],
      ['CLIENT', 'PAUSE', 'abc'],
      ['CLIENT', 'PAUSE', '-1'],
      ['CLIENT', 'PAUSE', '1.5'],
      ['CLIENT', 'PAUSE', '10', 'foo'],
      ['CLIENT', 'PAUSE', '10', 'all', 'x'],
      ['CLIENT', 'PAUSE'],
      ['CLIENT', 'UNPAUSE', 'x'],
    ];
    for (const args of cases) {
      const direct = errorText(await rawCall(server.port, args));
      const through = errorText(await rawCall(proxy.address.port, args));
      expect(through, args.join(' ')).toEqual(direct);
    }
  });
});

describe('CLIENT KILL', () => {
  const closed = (c: RawClient) => waitFor(() => c.closed, 'the connection to close');

  it('ID → :1 and the victim is disconnected; ADDR; the old form → +OK', async () => {
    const killer = await client();
    const v1 = await client();
    const v2 = await client();
    const v3 = await client();
    expect(await killer.call('CLIENT', 'KILL', 'ID', String(await v1.call('CLIENT', 'ID')))).toBe(1);
    await closed(v1);
    const addr2 = `${v2.socket.localAddress}:${v2.socket.localPort}`;
    expect(await killer.call('CLIENT', 'KILL', 'ADDR', addr2)).toBe(1);
    await closed(v2);
    const addr3 = `${v3.socket.localAddress}:${v3.socket.localPort}`;
    expect(await killer.call('CLIENT', 'KILL', addr3)).toBe('OK');
    await closed(v3);
    expect(errorText(await killer.call('CLIENT', 'KILL', addr3))).toBe('ERR:ERR No such client');
    expect(await killer.call('PING')).toBe('PONG');
    expect(proxy.clientCount()).toBe(1);
  });

  it('USER kills every other client of that user (SKIPME yes by default); SKIPME no kills the caller after its reply', async () => {
    const killer = await client();
    const others = [await client(), await client()];
    expect(await killer.call('CLIENT', 'KILL', 'USER', 'default')).toBe(2);
    for (const c of others) await closed(c);
    expect(await killer.call('CLIENT', 'KILL', 'USER', 'default', 'MAXAGE', '1000')).toBe(0);
    expect(await killer.call('CLIENT', 'KILL', 'USER', 'default', 'SKIPME', 'no')).toBe(1);
    await closed(killer);
  });

  it('a killed blocked client frees its lease (upstream unblocked, the next XREAD BLOCK works)', async () => {
    // XREAD … BLOCK keeps a leased connection (a consumer is a connection's); pops are parked at
    // respool, whose CLIENT KILL is in parked-pops.test.ts.
    const observer = await client();
    const blocked = await client();
    const id = String(await blocked.call('CLIENT', 'ID'));
    void blocked.call('XREAD', 'BLOCK', '0', 'STREAMS', 'cl:stream', '$').catch(() => undefined);
    await waitFor(async () => parseInfo(await observer.call('INFO', 'clients'))['blocked_clients'] === '1', 'respool to count the BLPOP blocked');
    await waitFor(async () => parseInfo(await rawCall(server.port, ['INFO', 'clients']))['blocked_clients'] === '1', 'the BLPOP to block upstream');
    const line = lines(await observer.call('CLIENT', 'LIST', 'ID', id))[0]!;
    expect(field(line, 'flags')).toBe('b');
    expect(field(line, 'cmd')).toBe('xread');
    expect(await observer.call('CLIENT', 'KILL', 'ID', id)).toBe(1);
    await closed(blocked);
    await waitFor(async () => parseInfo(await rawCall(server.port, ['INFO', 'clients']))['blocked_clients'] === '0', 'upstream blocked_clients back to 0');
    expect(parseInfo(await observer.call('INFO', 'clients'))['blocked_clients']).toBe('0');
    const next = await client();
    const read = next.call('XREAD', 'BLOCK', '5000', 'STREAMS', 'cl:stream', '$');
    await waitFor(async () => parseInfo(await rawCall(server.port, ['INFO', 'clients']))['blocked_clients'] === '1', 'the next XREAD to block upstream');
    expect(await observer.call('XADD', 'cl:stream', '1-1', 'f', 'x')).toBe('1-1');
    expect(await read).toEqual([['cl:stream', [['1-1', ['f', 'x']]]]]);
  });
});

describe('CLIENT PAUSE / UNPAUSE over respool\'s clients', () => {
  it('PAUSE 300 ALL holds another client\'s GET for ~300 ms (and, as in Valkey, CLIENT UNPAUSE too)', async () => {
    const pauser = await client();
    const other = await client();
    const third = await client();
    expect(await pauser.call('CLIENT', 'PAUSE', '300', 'ALL')).toBe('OK');
    const started = Date.now();
    const get = other.call('GET', 'cl:p').then(() => Date.now() - started);
    const unpause = third.call('CLIENT', 'UNPAUSE').then(() => Date.now() - started);
    expect(await get).toBeGreaterThanOrEqual(250);
    expect(await unpause).toBeGreaterThanOrEqual(250);
    expect(await other.call('PING')).toBe('PONG');
  });

  it('PAUSE WRITE lets GET through and holds SET (counted blocked) until UNPAUSE, which releases it at once', async () => {
    const pauser = await client();
    const writer = await client();
    expect(await pauser.call('CLIENT', 'PAUSE', '10000', 'WRITE')).toBe('OK');
    let t0 = Date.now();
    expect(await writer.call('GET', 'cl:w')).toBeNull();
    expect(Date.now() - t0).toBeLessThan(500); // not held by the 10 s pause (room for a loaded machine)
    let setDone = false;
    const set = writer.call('SET', 'cl:w', '1').then((r) => {
      setDone = true;
      return r;
    });
    await waitFor(async () => parseInfo(await pauser.call('INFO', 'clients'))['blocked_clients'] === '1', 'the paused SET to count as blocked');
    await new Promise((r) => setTimeout(r, 200));
    expect(setDone).toBe(false);
    expect(await rawCall(server.port, ['GET', 'cl:w'])).toBeNull();
    // PUBLISH may replicate: held too (Valkey's "special commands are paused by RO")
    const publisher = await client();
    let published = false;
    void publisher.call('PUBLISH', 'cl:pub', 'x').then(() => (published = true));
    t0 = Date.now();
    expect(await pauser.call('CLIENT', 'UNPAUSE')).toBe('OK');
    expect(await set).toBe('OK');
    expect(Date.now() - t0).toBeLessThan(500); // at once, not at the 10 s pause's end (room for a loaded machine)
    await waitFor(() => published, 'the held PUBLISH to be answered');
    expect(await writer.call('GET', 'cl:w')).toBe('1');
    expect(parseInfo(await pauser.call('INFO', 'clients'))['blocked_clients']).toBe('0');
  });

  it('the pausing client follows the rules too: its own pipelined SET waits for the end of a WRITE pause', async () => {
    const pauser = await client();
    const t0 = Date.now();
    const replies = await Promise.all([pauser.call('CLIENT', 'PAUSE', '200', 'WRITE'), pauser.call('GET', 'cl:s'), pauser.call('SET', 'cl:s', '1')]);
    expect(replies).toEqual(['OK', null, 'OK']);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
  });
});
