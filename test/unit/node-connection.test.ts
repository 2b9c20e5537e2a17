import { describe, expect, it } from 'vitest';
import { LeasedConnection } from '../../src/upstream/leased-connection.js';
import { NodeConnection } from '../../src/upstream/node-connection.js';
import { ProxyError } from '../../src/errors.js';
import { fakeSockets, flushWrites, recordedRequest, resp } from '../helpers/fake-upstream-socket.js';

// The connection core (src/upstream/node-connection.ts) in the role of a leased connection,
// against a fake socket: the role's handshake steps, what is out of band (pushes, a stream),
// 'settled', the deadline and its failure cause, `opened`. The shared-link role's own policy
// (READONLY, the silence check) and the FIFO's matching across split frames: link.test.ts.

function lease(over: { identity?: boolean; protocol?: 2 | 3 } = {}) {
  const fake = fakeSockets();
  const conn = new LeasedConnection({ host: '10.0.0.2', port: 6380, protocol: over.protocol ?? 2, auth: null, connectTimeoutMs: 1000, openSocket: fake.open, identity: over.identity });
  return { conn, socket: fake.sockets[0]! };
}

describe('NodeConnection core, as a leased connection (fake socket, no server)', () => {
  it('handshake: CLIENT SETNAME then CLIENT ID; the id is kept; requests sent before wait behind it and are not counted as the handshake', async () => {
    const { conn, socket } = lease();
    const log: string[] = [];
    conn.send(Buffer.from(resp('BLPOP', 'q', '0')), recordedRequest('pop', log));
    socket.open();
    await flushWrites();
    expect(socket.takeWritten()).toBe(resp('CLIENT', 'SETNAME', 'respool-lease') + resp('CLIENT', 'ID'));
    expect(conn.inflightCount).toBe(1); // the caller's request only
    socket.reply('+OK\r\n:42\r\n');
    expect([conn.state, conn.clientId]).toEqual(['ready', 42]);
    await conn.opened;
    await flushWrites();
    expect(socket.takeWritten()).toBe(resp('BLPOP', 'q', '0'));
    socket.reply('*2\r\n$1\r\nq\r\n$1\r\nv\r\n');
    expect(log).toEqual(['pop:*2\r\n$1\r\nq\r\n$1\r\nv']);
  });

  it('a user identity: HELLO carries SETNAME and its reply the id (no CLIENT ID); no id in it fails the connection', async () => {
    const ok = lease({ identity: true, protocol: 3 });
    ok.socket.open();
    await flushWrites();
    expect(ok.socket.takeWritten()).toBe(resp('HELLO', '3', 'SETNAME', 'respool-lease'));
    ok.socket.reply('%2\r\n$2\r\nid\r\n:7\r\n$5\r\nproto\r\n:3\r\n');
    expect([ok.conn.state, ok.conn.clientId]).toEqual(['ready', 7]);

    const bad = lease({ identity: true });
    bad.socket.open();
    await flushWrites();
    bad.socket.reply('*2\r\n$5\r\nproto\r\n:2\r\n');
    expect(bad.conn.state).toBe('closed');
    expect(bad.conn.closeReason).toMatch(/^handshake HELLO: no client id/);
    await expect(bad.conn.opened).rejects.toThrow();
  });

  it('pushes go to onPush, never to a request; a stream frame with nothing in flight goes to onStream, else ends the connection', async () => {
    const { conn, socket } = lease({ protocol: 3 });
    socket.open();
    await flushWrites();
    socket.reply('%1\r\n$2\r\nid\r\n:1\r\n:5\r\n'); // HELLO, CLIENT ID
    const pushes: string[] = [];
    const stream: string[] = [];
    conn.onPush = (f) => pushes.push(f.toString('latin1'));
    const log: string[] = [];
    conn.send(Buffer.from(resp('GET', 'k')), recordedRequest('get', log));
    socket.reply('>2\r\n$10\r\ninvalidate\r\n_\r\n$1\r\nv\r\n');
    expect([pushes.length, log]).toEqual([1, ['get:$1\r\nv']]);
    conn.onStream = (f) => stream.push(f.toString('latin1'));
    socket.reply('+1700000000.0 [0 lua] "get" "k"\r\n');
    expect(stream).toEqual(['+1700000000.0 [0 lua] "get" "k"\r\n']);
    conn.onStream = null;
    socket.reply('+surprise\r\n');
    expect([conn.state, conn.closeReason]).toEqual(['closed', 'upstream sent a reply nobody asked for']);
  });

  it("'settled' once a reply leaves nothing in flight", async () => {
    const { conn, socket } = lease();
    socket.open();
    await flushWrites();
    socket.reply('+OK\r\n:1\r\n');
    let settled = 0;
    conn.on('settled', () => settled++);
    conn.send(Buffer.from(resp('GET', 'a')), recordedRequest('a', []));
    conn.send(Buffer.from(resp('GET', 'b')), recordedRequest('b', []));
    socket.reply('$-1\r\n');
    expect(settled).toBe(0);
    socket.reply('$-1\r\n');
    expect(settled).toBe(1);
  });

  it('a deadline: the oldest request waiting past it fails everything written with cause "timeout", and what waits as unsent', async () => {
    const { conn, socket } = lease();
    const early = recordedRequest('early', []);
    socket.open();
    await flushWrites();
    socket.reply('+OK\r\n:1\r\n');
    const slow = recordedRequest('slow', []);
    conn.send(Buffer.from(resp('BLPOP', 'q', '0')), slow);
    conn.setDeadline(30);
    await new Promise((r) => setTimeout(r, 80));
    expect([conn.state, conn.timedOut, conn.closeCause]).toEqual(['closed', true, 'timeout']);
    expect(slow.failures).toEqual([{ error: ProxyError.timeout('10.0.0.2:6380', 30), written: true, cause: 'timeout' }]);
    conn.send(Buffer.from(resp('GET', 'k')), early);
    expect(early.failures[0]!.written).toBe(false);
    expect(socket.destroyed).toBe(true);
  });

  it("a refused handshake step: closeCause 'handshake-refused' and the node's error line, the reason's text as before; other ends have no cause", async () => {
    const refused = lease();
    refused.socket.open();
    await flushWrites();
    refused.socket.reply('-NOAUTH Authentication required.\r\n');
    expect([refused.conn.state, refused.conn.closeCause, refused.conn.handshakeRefusal, refused.conn.timedOut]).toEqual(['closed', 'handshake-refused', 'NOAUTH Authentication required.', false]);
    expect(refused.conn.closeReason).toBe('handshake CLIENT failed: NOAUTH Authentication required.');
    await expect(refused.conn.opened).rejects.toThrow();

    const lost = lease();
    lost.socket.open();
    await flushWrites();
    lost.socket.reply('+OK\r\n:3\r\n');
    lost.socket.fail('connection closed by upstream');
    expect([lost.conn.closeCause, lost.conn.handshakeRefusal]).toEqual([null, null]);
    const closed = lease();
    closed.conn.close();
    expect([closed.conn.closeCause, closed.conn.handshakeRefusal]).toEqual([null, null]);
  });

  it('onClosed: after onClosing and after every request held was failed (written and waiting), before the \'close\' listeners', async () => {
    const log: string[] = [];
    class Role extends NodeConnection {
      protected override onClosing(): void {
        log.push('onClosing');
      }
      protected override onClosed(reason: string): void {
        log.push(`onClosed ${reason} ${this.state} ${String(this.closeCause)}`);
      }
    }
    const fake = fakeSockets();
    const conn = new Role({ host: '10.0.0.3', port: 6381, protocol: 2, auth: null, clientName: 'role', connectTimeoutMs: 1000, openSocket: fake.open });
    const socket = fake.sockets[0]!;
    conn.on('close', (reason: string) => log.push(`close ${reason}`));
    conn.opened.catch(() => log.push('opened rejected'));
    socket.open();
    await flushWrites();
    expect(socket.takeWritten()).toBe(resp('CLIENT', 'SETNAME', 'role'));
    conn.send(Buffer.from(resp('GET', 'w')), recordedRequest('waiting', log));
    socket.reply('-ERR no names here\r\n');
    expect(log).toEqual(['onClosing', 'waiting:failed', 'onClosed handshake CLIENT failed: ERR no names here closed handshake-refused', 'close handshake CLIENT failed: ERR no names here']);
    await Promise.resolve();
    expect(log.at(-1)).toBe('opened rejected');

    log.length = 0;
    const ready = new Role({ host: '10.0.0.3', port: 6381, protocol: 2, auth: null, clientName: 'role', connectTimeoutMs: 1000, openSocket: fake.open });
    ready.on('close', (reason: string) => log.push(`close ${reason}`));
    fake.sockets[1]!.open();
    fake.sockets[1]!.reply('+OK\r\n');
    ready.send(Buffer.from(resp('GET', 'a')), recordedRequest('a', log));
    ready.send(Buffer.from(resp('GET', 'b')), recordedRequest('b', log));
    ready.close('bye');
    expect(log).toEqual(['onClosing', 'a:failed', 'b:failed', 'onClosed bye closed null', 'close bye']);
    ready.close('again');
    expect(log).toHaveLength(5); // once
  });
});
