import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';

/** A client straight to the server, in database `db` (the oracle for what respool did). */
function direct(server: ValkeyNode, db = 0): Valkey {
  return new Valkey({ host: server.host, port: server.port, db, maxRetriesPerRequest: 0 });
}

/** respool's shared links (CLIENT SETNAME respool) the server sees, per database. */
async function respoolLinksPerDb(server: ValkeyNode): Promise<Map<number, number>> {
  const list = String(await server.call('CLIENT', 'LIST'));
  const out = new Map<number, number>();
  for (const line of list.split('\n')) {
    if (!/ name=respool /.test(line)) continue;
    const db = Number(/ db=(\d+) /.exec(line)![1]);
    out.set(db, (out.get(db) ?? 0) + 1);
  }
  return out;
}

/** The same requests on a raw connection to each: their reply bytes. */
async function bothRaw(a: RawConnection, b: RawConnection, ...args: string[]): Promise<[string, string]> {
  return [await a.call(...args), await b.call(...args)];
}

describe('SELECT against a standalone upstream', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;
  const open: Valkey[] = [];
  const client = (options: { db?: number } = {}): Valkey => {
    const c = clientFor(proxy, options);
    open.push(c);
    return c;
  };

  beforeAll(async () => {
    server = await startStandalone();
    proxy = await startTestProxy([{ host: server.host, port: server.port }], { connectionsPerNode: 2 });
  });

  afterAll(async () => {
    for (const c of open) c.disconnect();
    await proxy?.close();
    await server?.stop();
  });

  it('SELECT 1 keeps the session in database 1: SET/GET there, isolated from database 0', async () => {
    const c = client();
    expect(await c.set('iso:k', 'zero')).toBe('OK');
    expect(await c.select(1)).toBe('OK');
    expect(await c.get('iso:k')).toBeNull();
    expect(await c.set('iso:k', 'one')).toBe('OK');
    expect(await c.get('iso:k')).toBe('one');
    expect(await c.client('INFO')).toMatch(/ db=1 /);
    const d0 = direct(server, 0);
    const d1 = direct(server, 1);
    try {
      expect(await d0.get('iso:k')).toBe('zero');
      expect(await d1.get('iso:k')).toBe('one');
    } finally {
      d0.disconnect();
      d1.disconnect();
    }
    // Another client still in database 0 on the same proxy.
    expect(await client().get('iso:k')).toBe('zero');
    expect(await c.select(0)).toBe('OK');
    expect(await c.get('iso:k')).toBe('zero');
  });

  it('two clients in different databases, interleaved and pipelined, each get their own data', async () => {
    const a = client({ db: 5 }); // iovalkey sends SELECT 5 on connect
    const b = client();
    expect(await b.select(6)).toBe('OK');
    const run = async (c: Valkey, tag: string) => {
      for (let round = 0; round < 5; round++) {
        const p = c.pipeline();
        for (let i = 0; i < 200; i++) p.set(`pipe:${i}`, `${tag}-${round}-${i}`).get(`pipe:${i}`).incr('pipe:count');
        const results = (await p.exec())!;
        for (let i = 0; i < 200; i++) {
          expect(results[3 * i]).toEqual([null, 'OK']);
          expect(results[3 * i + 1]).toEqual([null, `${tag}-${round}-${i}`]);
        }
      }
    };
    await Promise.all([run(a, 'a'), run(b, 'b')]);
    expect(await a.get('pipe:count')).toBe('1000');
    expect(await b.get('pipe:count')).toBe('1000');
    const d5 = direct(server, 5);
    const d6 = direct(server, 6);
    try {
      expect(await d5.get('pipe:7')).toBe('a-4-7');
      expect(await d6.get('pipe:7')).toBe('b-4-7');
      expect(await d5.dbsize()).toBe(201);
    } finally {
      d5.disconnect();
      d6.disconnect();
    }
    // Whole-data-set commands follow the session's database.
    expect(await a.dbsize()).toBe(201);
    expect((await a.keys('pipe:1*')).length).toBe(111);
    expect(await a.flushdb()).toBe('OK');
    expect(await a.dbsize()).toBe(0);
    expect(await b.dbsize()).toBe(201);
  });

  it("answers SELECT's errors byte for byte as Valkey does", async () => {
    const viaProxy = await RawConnection.connect(proxy.address.port);
    const viaServer = await RawConnection.connect(server.port);
    try {
      const cases = [
        ['SELECT', '16'], ['SELECT', '-1'], ['SELECT', 'abc'], ['SELECT', '1.5'], ['SELECT', '01'],
        ['SELECT', '+1'], ['SELECT', ' 1'], ['SELECT', '-0'], ['SELECT', ''], ['SELECT', '0x1'],
        ['SELECT', '3000000000'], ['SELECT', '-3000000000'], ['SELECT', '2147483648'],
        ['SELECT', '9223372036854775807'], ['SELECT', '9223372036854775808'], ['SELECT', '99999999999999999999'],
        ['SELECT'], ['SELECT', '1', '2'], ['SELECT', '15'], ['SELECT', '15'], ['SELECT', '0'],
      ];
      for (const args of cases) {
        const [p, s] = await bothRaw(viaProxy, viaServer, ...args);
        expect(p, args.join(' ')).toBe(s);
      }
      expect(await viaProxy.call('SELECT', '16')).toBe('-ERR DB index is out of range\r\n');
      expect(await viaProxy.call('SELECT', 'x')).toBe('-ERR value is not an integer or out of range\r\n');
      // A failed SELECT leaves the database as it was.
      expect(await viaProxy.call('SELECT', '9')).toBe('+OK\r\n');
      expect(await viaProxy.call('SELECT', '99')).toBe('-ERR DB index is out of range\r\n');
      expect(await viaProxy.call('CLIENT', 'INFO')).toMatch(/ db=9 /);
    } finally {
      viaProxy.close();
      viaServer.close();
    }
  });

  it('RESET goes back to database 0', async () => {
    const raw = await RawConnection.connect(proxy.address.port);
    try {
      expect(await raw.call('SELECT', '4')).toBe('+OK\r\n');
      expect(await raw.call('SET', 'reset:k', 'four')).toBe('+OK\r\n');
      // Pipelined: SET in 4, RESET, then GET in 0.
      raw.send('SET', 'reset:k2', 'four');
      raw.send('RESET');
      raw.send('GET', 'reset:k2');
      raw.send('CLIENT', 'INFO');
      expect(await raw.read()).toBe('+OK\r\n');
      expect(await raw.read()).toBe('+RESET\r\n');
      expect(await raw.read()).toBe('$-1\r\n');
      expect(await raw.read()).toMatch(/ db=0 /);
      expect(await raw.call('GET', 'reset:k')).toBe('$-1\r\n');
      expect(await raw.call('SELECT', '4')).toBe('+OK\r\n');
      expect(await raw.call('GET', 'reset:k2')).toBe('$4\r\nfour\r\n');
    } finally {
      raw.close();
    }
  });

  it('orders MOVE, SWAPDB and COPY … DB with the SELECTs around them, even pipelined', async () => {
    const c = client();
    expect(await c.select(10)).toBe('OK');
    const p = c.pipeline();
    p.set('mv:k', 'v');
    p.move('mv:k', 11);
    p.select(11);
    p.get('mv:k');
    p.call('COPY', 'mv:k', 'mv:copy', 'DB', '12');
    p.swapdb(11, 13);
    p.get('mv:k');
    p.select(13);
    p.get('mv:k');
    p.select(12);
    p.get('mv:copy');
    const results = (await p.exec())!.map(([err, value]) => err ?? value);
    expect(results).toEqual(['OK', 1, 'OK', 'v', 1, 'OK', null, 'OK', 'v', 'OK', 'v']);
  });

  it('BLPOP in database 2 wakes on LPUSH in database 2 only', async () => {
    const blocked = client({ db: 2 });
    const other = client();
    const same = client({ db: 2 });
    expect(await blocked.ping()).toBe('PONG');
    let result: unknown = 'pending';
    const waiting = blocked.blpop('bl:list', 10).then((r) => (result = r));
    await new Promise((r) => setTimeout(r, 200));
    expect(await other.lpush('bl:list', 'in-db0')).toBe(1);
    await new Promise((r) => setTimeout(r, 300));
    expect(result).toBe('pending');
    expect(await same.lpush('bl:list', 'in-db2')).toBe(1);
    await waiting;
    expect(result).toEqual(['bl:list', 'in-db2']);
    expect(await other.lrange('bl:list', 0, -1)).toEqual(['in-db0']);
    // The lease goes back to database 2's pool: the next blocking command in database 0 is in 0.
    expect(await other.blpop('bl:list', 1)).toEqual(['bl:list', 'in-db0']);
    expect(await same.blpop('bl:list', 0.1)).toBeNull();
  });

  it('WATCH / MULTI / EXEC in database 3', async () => {
    const c = client({ db: 3 });
    const same = client({ db: 3 });
    const zero = client();
    expect(await c.set('w:k', '1')).toBe('OK');
    // A write to the same name in database 0 does not touch the watched key.
    expect(await c.watch('w:k')).toBe('OK');
    expect(await zero.set('w:k', 'db0')).toBe('OK');
    expect(await c.multi().incr('w:k').exec()).toEqual([[null, 2]]);
    // A write in database 3 does.
    expect(await c.watch('w:k')).toBe('OK');
    expect(await same.set('w:k', '10')).toBe('OK');
    expect(await c.multi().incr('w:k').exec()).toBeNull();
    expect(await c.get('w:k')).toBe('10');
    expect(await zero.get('w:k')).toBe('db0');
  });

  it('SELECT inside MULTI (no WATCH): the commands after it run in its database; the client is there after EXEC', async () => {
    const viaProxy = await RawConnection.connect(proxy.address.port);
    const viaServer = await RawConnection.connect(server.port);
    try {
      for (const conn of [viaProxy, viaServer]) {
        expect(await conn.call('SELECT', '0')).toBe('+OK\r\n');
        expect(await conn.call('DEL', 'tx:a')).toMatch(/^:/);
        expect(await conn.call('SELECT', '7')).toBe('+OK\r\n');
        expect(await conn.call('DEL', 'tx:a')).toMatch(/^:/);
        expect(await conn.call('SELECT', '0')).toBe('+OK\r\n');
      }
      const script = [
        ['MULTI'], ['SET', 'tx:a', 'zero'], ['SELECT', '7'], ['SET', 'tx:a', 'seven'], ['GET', 'tx:a'],
        ['SELECT', '99'], ['SELECT', 'x'], ['GET', 'tx:a'], ['EXEC'], ['GET', 'tx:a'], ['CLIENT', 'INFO'],
      ];
      for (const args of script.slice(0, -1)) {
        const [p, s] = await bothRaw(viaProxy, viaServer, ...args);
        // respool adds nothing of its own to EXEC's array (its restoring SELECT is dropped).
        if (args[0] === 'CLIENT') continue;
        expect(p, args.join(' ')).toBe(s);
      }
      expect(await viaProxy.call('CLIENT', 'INFO')).toMatch(/ db=7 /);
      // Pipelined right behind EXEC: the command after it already runs in the new database.
      viaProxy.send('MULTI');
      viaProxy.send('SELECT', '8');
      viaProxy.send('SET', 'tx:b', 'eight');
      viaProxy.send('EXEC');
      viaProxy.send('GET', 'tx:b');
      expect(await viaProxy.read()).toBe('+OK\r\n');
      expect(await viaProxy.read()).toBe('+QUEUED\r\n');
      expect(await viaProxy.read()).toBe('+QUEUED\r\n');
      expect(await viaProxy.read()).toBe('*2\r\n+OK\r\n+OK\r\n');
      expect(await viaProxy.read()).toBe('$5\r\neight\r\n');
      // A transaction that aborts leaves the database as it was.
      expect(await viaProxy.call('MULTI')).toBe('+OK\r\n');
      expect(await viaProxy.call('SELECT', '9')).toBe('+QUEUED\r\n');
      expect(await viaProxy.call('NOSUCHCOMMAND')).toMatch(/^-ERR unknown command/);
      expect(await viaProxy.call('EXEC')).toMatch(/^-EXECABORT/);
      expect(await viaProxy.call('CLIENT', 'INFO')).toMatch(/ db=8 /);
    } finally {
      viaProxy.close();
      viaServer.close();
    }
    // The shared links were put back: clients in database 0 and 7 still see their own data.
    const zero = client();
    const seven = client({ db: 7 });
    for (let i = 0; i < 4; i++) {
      expect(await zero.get('tx:a')).toBe('zero');
      expect(await seven.get('tx:a')).toBe('seven');
    }
    expect(await zero.get('tx:b')).toBeNull();
  });

  it('SELECT on a WATCH lane switches the leased connection; a lease handed back in another database is not reused', async () => {
    const c = client();
    const check = client({ db: 6 });
    expect(await check.set('lane:k', 'six')).toBe('OK');
    expect(await c.set('lane:k', 'zero')).toBe('OK');
    expect(await c.watch('lane:k')).toBe('OK');
    expect(await c.select(6)).toBe('OK');
    expect(await c.get('lane:k')).toBe('six');
    expect(await c.unwatch()).toBe('OK'); // the lane ends in database 6
    expect(await c.client('INFO')).toMatch(/ db=6 /);
    expect(await c.get('lane:k')).toBe('six');
    // SELECT queued inside MULTI on the lane: the client's database changes at EXEC.
    expect(await c.watch('lane:k')).toBe('OK');
    const results = await c.multi().select(2).set('lane:k', 'two').exec();
    expect(results).toEqual([[null, 'OK'], [null, 'OK']]);
    expect(await c.client('INFO')).toMatch(/ db=2 /);
    expect(await c.get('lane:k')).toBe('two');
    // Clients in database 0 WATCHing get connections in database 0 (none reused from 6 or 2).
    for (let i = 0; i < 3; i++) {
      const z = client();
      expect(await z.watch('lane:k')).toBe('OK');
      expect(await z.get('lane:k')).toBe('zero');
      expect(await z.unwatch()).toBe('OK');
      z.disconnect();
    }
  });

  it('keeps at most connectionsPerNode shared links per database in use', async () => {
    const clients: Valkey[] = [];
    for (let i = 0; i < 30; i++) clients.push(client({ db: i % 3 }));
    await Promise.all(
      clients.map(async (c, i) => {
        const p = c.pipeline();
        for (let j = 0; j < 50; j++) p.set(`links:${i}:${j}`, 'x').get(`links:${i}:${j}`);
        await p.exec();
      }),
    );
    const perDb = await respoolLinksPerDb(server);
    for (const db of [0, 1, 2]) {
      expect(perDb.get(db), `db ${db}`).toBeGreaterThan(0);
      expect(perDb.get(db), `db ${db}`).toBeLessThanOrEqual(2);
      expect(proxy.pools.openLinksForDb(server.address, db)).toBeLessThanOrEqual(2);
    }
    for (const [db, n] of perDb) expect(n, `db ${db}`).toBeLessThanOrEqual(2);
    for (const c of clients) c.disconnect();
  });

  it("learns the upstream's databases setting (CONFIG GET databases)", async () => {
    const small = await startStandalone({ args: ['--databases', '4'] });
    const p = await startTestProxy([{ host: small.host, port: small.port }]);
    const viaProxy = await RawConnection.connect(p.address.port);
    const viaServer = await RawConnection.connect(small.port);
    try {
      for (const n of ['3', '4', '16', '0']) {
        const [a, b] = await bothRaw(viaProxy, viaServer, 'SELECT', n);
        expect(a, `SELECT ${n}`).toBe(b);
      }
      expect(await viaProxy.call('SELECT', '4')).toBe('-ERR DB index is out of range\r\n');
    } finally {
      viaProxy.close();
      viaServer.close();
      await p.close();
      await small.stop();
    }
  });

  it('assumes 16 databases when CONFIG GET databases is refused', async () => {
    const locked = await startStandalone({ args: ['--databases', '20', '--rename-command', 'CONFIG', ''] });
    const p = await startTestProxy([{ host: locked.host, port: locked.port }]);
    const raw = await RawConnection.connect(p.address.port);
    try {
      expect(await raw.call('SELECT', '15')).toBe('+OK\r\n');
      expect(await raw.call('SET', 'k', 'v')).toBe('+OK\r\n');
      expect(await raw.call('SELECT', '16')).toBe('-ERR DB index is out of range\r\n');
      expect(await raw.call('GET', 'k')).toBe('$1\r\nv\r\n');
    } finally {
      raw.close();
      await p.close();
      await locked.stop();
    }
  });

  it('refuses to combine another database with CLIENT TRACKING, with an error naming why', async () => {
    const raw = await RawConnection.connect(proxy.address.port);
    try {
      expect(await raw.call('HELLO', '3')).toMatch(/^%/);
      expect(await raw.call('SELECT', '2')).toBe('+OK\r\n');
      // RESP3 links of database 2.
      expect(await raw.call('HSET', 'r3:h', 'f', 'v')).toBe(':1\r\n');
      expect(await raw.call('HGETALL', 'r3:h')).toBe('%1\r\n$1\r\nf\r\n$1\r\nv\r\n');
      expect(await raw.call('CLIENT', 'TRACKING', 'on')).toMatch(/^-ERR respool: CLIENT TRACKING is only supported in database 0/);
      expect(await raw.call('SELECT', '0')).toBe('+OK\r\n');
      expect(await raw.call('CLIENT', 'TRACKING', 'on')).toBe('+OK\r\n');
      expect(await raw.call('SELECT', '2')).toMatch(/^-ERR respool: SELECT of another database is not supported while CLIENT TRACKING is on/);
      expect(await raw.call('SELECT', '0')).toBe('+OK\r\n');
      expect(await raw.call('CLIENT', 'TRACKING', 'off')).toBe('+OK\r\n');
      expect(await raw.call('SELECT', '2')).toBe('+OK\r\n');
      expect(await raw.call('HGET', 'r3:h', 'f')).toBe('$1\r\nv\r\n');
    } finally {
      raw.close();
    }
    const d2 = direct(server, 2);
    try {
      expect(await d2.hget('r3:h', 'f')).toBe('v');
    } finally {
      d2.disconnect();
    }
  });
});
