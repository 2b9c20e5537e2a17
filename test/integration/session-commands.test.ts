import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { parseInfo } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { rawExchange } from '../helpers/raw-resp.js';
import { waitFor } from '../helpers/wait.js';

/** Every byte that came back within a short wait (CLIENT REPLY OFF / subscribed mode: no reply count to wait for). */
const EXCHANGE = { collectMs: 300 };

// One standalone server and one respool for the whole file: each describe leaves no state behind.
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

describe('INFO clients answers about respool\'s own clients', () => {
  const clients: Valkey[] = [];
  const open = () => {
    const c = clientFor(proxy);
    clients.push(c);
    return c;
  };

  afterAll(() => {
    for (const c of clients) c.disconnect();
  });

  it('counts connected, blocked and watching clients the way the suite waits on them', async () => {
    const observer = open();
    const info = async () => parseInfo(await observer.info('clients'));
    const before = await info();
    expect(before['connected_clients']).toBe('1');
    expect(before['blocked_clients']).toBe('0');
    expect(Object.keys(before)).toEqual([
      'connected_clients', 'cluster_connections', 'maxclients', 'client_recent_max_input_buffer',
      'client_recent_max_output_buffer', 'blocked_clients', 'tracking_clients', 'pubsub_clients',
      'watching_clients', 'total_watched_keys', 'total_blocking_keys', // clients_in_timeout_table: left out (info.ts)
      'total_blocking_keys_on_nokey',
    ]);

    const blocker = open();
    const popped = blocker.blpop('info:q', 0);
    await waitFor(async () => (await info())['blocked_clients'] === '1', 'the BLPOP to count as blocked');

    const watcher = open();
    expect(await watcher.watch('info:w')).toBe('OK');
    const during = await info();
    expect(during['watching_clients']).toBe('1');
    expect(during['total_watched_keys']).toBe('1');
    expect(during['total_blocking_keys']).toBe('1');
    expect(during['connected_clients']).toBe('3');

    await observer.lpush('info:q', 'v');
    expect(await popped).toEqual(['info:q', 'v']);
    expect(await watcher.unwatch()).toBe('OK');
    await waitFor(async () => {
      const after = await info();
      return after['blocked_clients'] === '0' && after['watching_clients'] === '0';
    }, 'no blocked and no watching clients');
    // other sections still come from the upstream
    expect(await observer.info('server')).toMatch(/redis_version:/);
  });
});

describe('CLIENT REPLY through respool', () => {
  it('OFF, SKIP and ON suppress exactly the replies Valkey suppresses (same bytes as the server)', async () => {
    const script: string[][] = [
      ['SET', 'reply:k', '1'],
      ['CLIENT', 'REPLY', 'SKIP'],
      ['INCR', 'reply:k'],
      ['GET', 'reply:k'],
      ['CLIENT', 'REPLY', 'OFF'],
      ['INCR', 'reply:k'],
      ['PING'],
      ['CLIENT', 'REPLY', 'ON'],
      ['GET', 'reply:k'],
      ['CLIENT', 'REPLY', 'MAYBE'],
    ];
    const direct = await rawExchange(server.port, script, EXCHANGE);
    await rawPipelineFlush(server.port);
    const through = await rawExchange(proxy.address.port, script, EXCHANGE);
    expect(through).toBe(direct);
    expect(direct).toBe('+OK\r\n$1\r\n2\r\n+OK\r\n$1\r\n3\r\n-ERR syntax error\r\n');
  });
});

/** Resets the key between the two runs. */
async function rawPipelineFlush(port: number): Promise<void> {
  const { rawCall } = await import('../harness/raw-client.js');
  await rawCall(port, ['DEL', 'reply:k']);
}

describe('CLIENT UNBLOCK of respool\'s own client ids', () => {
  const clients: Valkey[] = [];

  afterAll(() => {
    for (const c of clients) c.disconnect();
  });

  it('unblocks a client blocked on a lease with nil (TIMEOUT) or -UNBLOCKED (ERROR); :0 when not blocked', async () => {
    const admin = clientFor(proxy);
    const blocked = clientFor(proxy);
    clients.push(admin, blocked);
    const id = Number(await blocked.client('ID'));
    expect(await admin.call('CLIENT', 'UNBLOCK', String(id))).toBe(0);
    const waiting = blocked.blpop('unblock:q', 0);
    await waitFor(async () => parseInfo(await admin.info('clients'))['blocked_clients'] === '1', 'the BLPOP to block');
    expect(await admin.call('CLIENT', 'UNBLOCK', String(id))).toBe(1);
    expect(await waiting).toBeNull();
    const again = blocked.blpop('unblock:q', 0).catch((e: Error) => e);
    await waitFor(async () => parseInfo(await admin.info('clients'))['blocked_clients'] === '1', 'the second BLPOP to block');
    expect(await admin.call('CLIENT', 'UNBLOCK', String(id), 'ERROR')).toBe(1);
    expect(String(await again)).toMatch(/UNBLOCKED client unblocked via CLIENT UNBLOCK/);
    await expect(admin.call('CLIENT', 'UNBLOCK', String(id), 'LATER')).rejects.toThrow('ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR');
    await expect(admin.call('CLIENT', 'UNBLOCK', 'x')).rejects.toThrow('ERR value is not an integer or out of range');
  });
});

describe('RESET of a subscribed client', () => {
  it('leaves subscribed mode without confirmations, as Valkey; the upstream subscription goes', async () => {
    const script = [['SUBSCRIBE', 'reset:ch'], ['PSUBSCRIBE', 'reset:*'], ['RESET'], ['PING'], ['GET', 'reset:k']];
    const direct = await rawExchange(server.port, script, EXCHANGE);
    const through = await rawExchange(proxy.address.port, script, EXCHANGE);
    expect(through).toBe(direct);
    expect(direct).toMatch(/\+RESET\r\n\+PONG\r\n\$-1\r\n$/);
    const { rawCall } = await import('../harness/raw-client.js');
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && JSON.stringify(await rawCall(server.port, ['PUBSUB', 'NUMSUB', 'reset:ch'])) !== '["reset:ch",0]') {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await rawCall(server.port, ['PUBSUB', 'NUMSUB', 'reset:ch'])).toEqual(['reset:ch', 0]);
  });
});

describe('what must not reach a shared link inside MULTI or a WATCH lane', () => {
  it('SUBSCRIBE, MONITOR and refused commands are refused at queue time (EXECABORT); PUBLISH is queued', async () => {
    const { rawPipeline } = await import('../harness/raw-client.js');
    const replies = await rawPipeline(proxy.address.port, [
      ['MULTI'],
      ['PUBLISH', 'q:ch', 'x'],
      ['SUBSCRIBE', 'q:ch'],
      ['MONITOR'],
      ['CLIENT', 'NO-TOUCH', 'on'],
      ['EXEC'],
      ['PING'],
    ]);
    expect(replies[0]).toBe('OK');
    expect(replies[1]).toBe('QUEUED');
    expect(String(replies[2])).toMatch(/SUBSCRIBE cannot be queued inside MULTI through respool/);
    expect(String(replies[3])).toMatch(/MONITOR cannot be queued inside MULTI through respool/);
    expect(String(replies[4])).toMatch(/CLIENT NO-TOUCH is not supported through respool/);
    expect(String(replies[5])).toMatch(/EXECABORT Transaction discarded because of previous errors/);
    expect(replies[6]).toBe('PONG');
  });

  it('on a WATCH lane, refused commands are refused, not sent on the lease', async () => {
    const { rawPipeline } = await import('../harness/raw-client.js');
    const replies = await rawPipeline(proxy.address.port, [['WATCH', 'lane:k'], ['CLIENT', 'NO-TOUCH', 'on'], ['UNWATCH'], ['PING']]);
    expect(replies[0]).toBe('OK');
    expect(String(replies[1])).toMatch(/CLIENT NO-TOUCH is not supported through respool/);
    expect(replies.slice(2)).toEqual(['OK', 'PONG']);
  });

  it('in RESP2 subscribed mode a wrong arity is reported before the subscribed context, as Valkey', async () => {
    const script = [['SUBSCRIBE', 'arity:ch'], ['GET'], ['GET', 'k']];
    const direct = await rawExchange(server.port, script, EXCHANGE);
    const through = await rawExchange(proxy.address.port, script, EXCHANGE);
    expect(through).toBe(direct);
    expect(direct).toContain("-ERR wrong number of arguments for 'get' command\r\n");
  });
});
