import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import type { RespoolProxy } from '../../src/server.js';

/**
 * Users and permissions at respool, against Valkey itself: `direct` is a valkey-server given the
 * same rules with ACL SETUSER; respool sits in front of `backend` (a plain server) configured with
 * those users. Every command runs as the same user on both, and the replies (errors byte for
 * byte) must be equal.
 */

const sha = (pw: string) => createHash('sha256').update(pw).digest('hex');

const USERS: Array<{ name: string; rules: string; password: string }> = [
  { name: 'app', rules: 'on >secret ~app:* +@read +@write -@dangerous +config|get -flushall +select|0', password: 'secret' },
  { name: 'rw', rules: `on #${sha('pw2')} %R~r:* %W~w:* ~both:* +@all -@dangerous`, password: 'pw2' },
  { name: 'sub', rules: 'on nopass resetchannels &chat:* +@pubsub +ping -pubsub', password: 'anything' },
  { name: 'gone', rules: 'off >pw3 +@all ~*', password: 'pw3' },
  { name: 'few', rules: 'on >pw4 allkeys allchannels -@all +get +set +client|getname +publish', password: 'pw4' },
  { name: 'nokeys', rules: 'on >pw5 +@all resetkeys', password: 'pw5' },
];

/** Per user: the commands to run both ways. */
const COMMANDS: Record<string, string[][]> = {
  app: [
    ['GET', 'app:1'], ['SET', 'app:1', 'x'], ['GET', 'app:1'], ['SET', 'other', 'x'], ['GET', 'other'],
    ['MGET', 'app:1', 'other'], ['FLUSHALL'], ['KEYS', '*'], ['CONFIG', 'GET', 'maxmemory'], ['CONFIG', 'SET', 'maxmemory', '0'],
    ['SELECT', '0'], ['SELECT', '1'], ['PUBLISH', 'chat', 'x'], ['GET'], ['DEL', 'app:1', 'nope'], ['ACL', 'WHOAMI'],
    ['MULTI'], ['EXEC'],
  ],
  rw: [
    ['GET', 'r:1'], ['SET', 'r:1', 'x'], ['SET', 'w:1', 'x'], ['GET', 'w:1'], ['SET', 'w:1', 'y', 'GET'], ['SET', 'both:1', 'x', 'GET'],
    ['EXISTS', 'r:1', 'w:1'], ['COPY', 'w:1', 'r:2'], ['COPY', 'both:1', 'w:2'], ['APPEND', 'w:1', 'z'], ['STRLEN', 'w:1'],
    ['BITFIELD', 'r:1', 'GET', 'u8', '0'], ['BITFIELD', 'r:1', 'SET', 'u8', '0', '1'], ['DEL', 'w:1', 'w:2'], ['FLUSHDB'],
    ['ACL', 'WHOAMI'], ['ACL', 'LIST'],
    ['MULTI'], ['SET', 'r:1', 'x'], ['GET', 'r:1'], ['EXEC'],
  ],
  sub: [
    ['PING'], ['GET', 'k'], ['PUBLISH', 'chat:1', 'x'], ['PUBLISH', 'news', 'x'], ['SPUBLISH', 'news', 'x'],
    ['SUBSCRIBE', 'news'], ['SUBSCRIBE', 'chat:1', 'news'], ['PSUBSCRIBE', 'chat:1*'], ['SSUBSCRIBE', 'news'],
    ['PUBSUB', 'CHANNELS'], ['PSUBSCRIBE', 'chat:*'],
  ],
  few: [
    ['GET', 'any'], ['SET', 'any', 'v'], ['DEL', 'any'], ['CLIENT', 'GETNAME'], ['CLIENT', 'SETNAME', 'x'], ['PUBLISH', 'anything', 'x'],
    ['ACL', 'WHOAMI'], ['PING'], ['HELLO'],
  ],
  nokeys: [['GET', 'a'], ['PING'], ['SET', 'a', 'b'], ['ECHO', 'x'], ['OBJECT', 'ENCODING', 'a']],
};

async function call(conn: RawConnection, args: string[]): Promise<string> {
  conn.send(...args);
  return conn.read();
}

describe('users and permissions (ACL) against Valkey', () => {
  let direct: ValkeyNode;
  let backend: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    [direct, backend] = await Promise.all([startStandalone(), startStandalone()]);
    const admin = await RawConnection.connect(direct.port);
    for (const u of USERS) expect(await call(admin, ['ACL', 'SETUSER', u.name, ...u.rules.split(' ')])).toBe('+OK\r\n');
    admin.close();
    proxy = await startTestProxy([{ host: backend.host, port: backend.port }], {
      mode: 'standalone',
      users: [
        { name: 'default', rules: 'on nopass ~* &* +@all' }, // Valkey's default user, for ACL LIST
        ...USERS.map((u) => ({ name: u.name, rules: u.rules })),
        { name: 'ops', rules: 'on >ops +@all ~* &* +@respool-admin' },
      ],
    });
  }, 30_000);
  afterAll(async () => {
    await proxy?.close();
    await Promise.all([direct?.stop(), backend?.stop()]);
  });

  for (const u of USERS) {
    it(`user ${u.name} (${u.rules}): AUTH and every command as Valkey answers`, async () => {
      const a = await RawConnection.connect(direct.port);
      const b = await RawConnection.connect(proxy.address.port);
      try {
        const authA = await call(a, ['AUTH', u.name, u.password]);
        expect(await call(b, ['AUTH', u.name, u.password])).toBe(authA);
        expect(await call(b, ['AUTH', u.name, 'wrong!'])).toBe(await call(a, ['AUTH', u.name, 'wrong!']));
        if (authA !== '+OK\r\n') return; // an `off` user: WRONGPASS both ways
        for (const cmd of COMMANDS[u.name] ?? []) {
          const want = await call(a, cmd);
          const got = await call(b, cmd);
          if (cmd[0] === 'ACL' && cmd[1] === 'LIST') continue; // compared below (respool has the extra `ops` user)
          if (cmd[0] === 'HELLO') {
            expect(got[0]).toBe(want[0]);
            continue;
          }
          expect(`${cmd.join(' ')} → ${got}`).toBe(`${cmd.join(' ')} → ${want}`);
        }
      } finally {
        a.close();
        b.close();
      }
    });
  }

  it('HELLO … AUTH authenticates, and fails as Valkey', async () => {
    const a = await RawConnection.connect(direct.port);
    const b = await RawConnection.connect(proxy.address.port);
    expect(await call(b, ['HELLO', '3', 'AUTH', 'app', 'nope'])).toBe(await call(a, ['HELLO', '3', 'AUTH', 'app', 'nope']));
    expect(await call(b, ['HELLO', '3', 'AUTH', 'gone', 'pw3'])).toBe(await call(a, ['HELLO', '3', 'AUTH', 'gone', 'pw3']));
    expect((await call(b, ['HELLO', '2', 'AUTH', 'app', 'secret']))[0]).toBe('*');
    expect(await call(b, ['GET', 'app:hello'])).toBe('$-1\r\n'); // authenticated as app
    expect(await call(b, ['FLUSHALL'])).toBe("-NOPERM User app has no permissions to run the 'flushall' command\r\n");
    a.close();
    b.close();
  });

  it('ACL LIST, USERS, CAT and DRYRUN as Valkey for the same users', async () => {
    const a = await RawConnection.connect(direct.port);
    const b = await RawConnection.connect(proxy.address.port);
    const lines = async (conn: RawConnection, cmd: string[]) => (await call(conn, cmd)).split('\r\n');
    const listA = await lines(a, ['ACL', 'LIST']);
    const listB = (await lines(b, ['ACL', 'LIST'])).filter((l) => !l.startsWith('user ops '));
    // The array header differs by the one extra user; each line must be the same.
    expect(listB.filter((l) => l.startsWith('user '))).toEqual(listA.filter((l) => l.startsWith('user ')));
    expect(await lines(b, ['ACL', 'USERS'])).toContain('ops');
    for (const cat of ['geo', 'dangerous', 'read', 'pubsub', 'connection']) {
      const want = (await lines(a, ['ACL', 'CAT', cat])).slice(1).sort();
      const got = (await lines(b, ['ACL', 'CAT', cat])).slice(1).sort();
      expect(got).toEqual(want);
    }
    const cats = (await lines(a, ['ACL', 'CAT'])).filter((l) => !l.startsWith('$') && !l.startsWith('*') && l !== '');
    const catsB = (await lines(b, ['ACL', 'CAT'])).filter((l) => !l.startsWith('$') && !l.startsWith('*') && l !== '');
    expect(catsB).toEqual([...cats, 'respool-admin']);
    expect(await call(b, ['ACL', 'CAT', 'nope'])).toBe(await call(a, ['ACL', 'CAT', 'nope']));
    const dryruns: string[][] = [
      ['app', 'get', 'app:1'], ['app', 'flushall'], ['app', 'set', 'other', 'x'], ['app', 'config', 'get', 'x'],
      ['rw', 'set', 'r:1', 'x'], ['sub', 'publish', 'news', 'x'], ['sub', 'psubscribe', 'chat:*'], ['nosuch', 'get', 'x'],
      ['app', 'nosuchcommand'], ['app', 'get'],
    ];
    for (const d of dryruns) {
      const cmd = ['ACL', 'DRYRUN', ...d];
      expect(`${d.join(' ')} → ${await call(b, cmd)}`).toBe(`${d.join(' ')} → ${await call(a, cmd)}`);
    }
    // Users made at run time, as on Valkey (acl-runtime.test.ts goes further).
    for (const cmd of [
      ['ACL', 'SETUSER', 'tmp', 'on', '>p', '~t:*', '+get', '&c:*'], ['ACL', 'GETUSER', 'tmp'], ['ACL', 'SETUSER', 'tmp', '+bogus'],
      ['ACL', 'DRYRUN', 'tmp', 'get', 't:1'], ['ACL', 'DELUSER', 'tmp', 'nobody'], ['ACL', 'GETUSER', 'tmp'], ['ACL', 'DELUSER', 'default'],
    ]) {
      expect(`${cmd.join(' ')} → ${await call(b, cmd)}`).toBe(`${cmd.join(' ')} → ${await call(a, cmd)}`);
    }
    a.close();
    b.close();
  });

  it('RESPOOL … only for a user with +@respool-admin', async () => {
    const b = await RawConnection.connect(proxy.address.port);
    // the default user here has +@all, which does not include respool's category
    expect(await call(b, ['RESPOOL', 'SPLIT', 'LIST'])).toBe("-NOPERM User default has no permissions to run the 'respool' command\r\n");
    expect(await call(b, ['AUTH', 'app', 'secret'])).toBe('+OK\r\n');
    expect(await call(b, ['RESPOOL', 'HOTKEYS'])).toBe("-NOPERM User app has no permissions to run the 'respool' command\r\n");
    expect(await call(b, ['AUTH', 'ops', 'ops'])).toBe('+OK\r\n');
    expect(await call(b, ['RESPOOL', 'SPLIT', 'LIST'])).not.toMatch(/^-NOPERM/);
    b.close();
  });

  it('a restricted default user: with a password new clients must AUTH; without, its rules apply', async () => {
    const admin = await RawConnection.connect(direct.port);
    const rules = 'resetpass >dpw resetkeys ~k:* +@all';
    expect(await call(admin, ['ACL', 'SETUSER', 'default', ...rules.split(' ')])).toBe('+OK\r\n');
    const p1 = await startTestProxy([{ host: backend.host, port: backend.port }], {
      mode: 'standalone', users: [{ name: 'default', rules: `on ${rules}` }],
    });
    const a = await RawConnection.connect(direct.port);
    const b = await RawConnection.connect(p1.address.port);
    for (const cmd of [['GET', 'k:1'], ['AUTH', 'nope'], ['AUTH', 'dpw'], ['GET', 'k:1'], ['GET', 'x'], ['ACL', 'WHOAMI']]) {
      expect(`${cmd.join(' ')} → ${await call(b, cmd)}`).toBe(`${cmd.join(' ')} → ${await call(a, cmd)}`);
    }
    a.close();
    b.close();
    await p1.close();
    // restore direct's default user for the other tests (the admin connection is still authenticated)
    expect(await call(admin, ['ACL', 'SETUSER', 'default', 'reset', 'on', 'nopass', '~*', '&*', '+@all'])).toBe('+OK\r\n');
    admin.close();

    // nopass but restricted: clients are the default user without AUTH, limited by its rules.
    const p2 = await startTestProxy([{ host: backend.host, port: backend.port }], {
      mode: 'standalone', users: [{ name: 'default', rules: 'on nopass ~k:* +get +auth' }],
    });
    const c = await RawConnection.connect(p2.address.port);
    expect(await call(c, ['GET', 'k:1'])).toBe('$-1\r\n');
    expect(await call(c, ['GET', 'x'])).toBe('-NOPERM No permissions to access a key\r\n');
    expect(await call(c, ['SET', 'k:1', 'v'])).toBe("-NOPERM User default has no permissions to run the 'set' command\r\n");
    c.close();
    await p2.close();

    // users configured without a default: the default user is off (`reset`), AUTH is required
    const p3 = await startTestProxy([{ host: backend.host, port: backend.port }], {
      mode: 'standalone', users: [{ name: 'app', password: 'x' }],
    });
    const d = await RawConnection.connect(p3.address.port);
    expect(await call(d, ['GET', 'k'])).toBe('-NOAUTH Authentication required.\r\n');
    expect(await call(d, ['AUTH', 'default', 'x'])).toMatch(/^-WRONGPASS/);
    expect(await call(d, ['AUTH', 'app', 'x'])).toBe('+OK\r\n');
    const bulk = (s: string) => `$${s.length}\r\n${s}\r\n`;
    expect(await call(d, ['ACL', 'LIST'])).toBe(
      `*2\r\n${bulk(`user app on sanitize-payload #${sha('x')} ~* &* +@all`)}${bulk('user default off sanitize-payload resetchannels -@all')}`,
    );
    d.close();
    await p3.close();
  });

  it('no users configured: AUTH errors as Valkey with no password, RESPOOL open', async () => {
    const p = await startTestProxy([{ host: backend.host, port: backend.port }], { mode: 'standalone' });
    const a = await RawConnection.connect(backend.port);
    const b = await RawConnection.connect(p.address.port);
    for (const cmd of [['AUTH', 'x'], ['AUTH', 'anyone', 'anything'], ['AUTH', 'default', 'anything'], ['HELLO', '3', 'AUTH', 'anyone', 'x'], ['AUTH', 'a', 'b', 'c'], ['ACL', 'WHOAMI']]) {
      expect(`${cmd.join(' ')} → ${await call(b, cmd)}`).toBe(`${cmd.join(' ')} → ${await call(a, cmd)}`);
    }
    expect(await call(b, ['RESPOOL', 'SPLIT', 'LIST'])).not.toMatch(/^-NOPERM/);
    a.close();
    b.close();
    await p.close();
  });
});
