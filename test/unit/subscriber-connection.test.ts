import { describe, expect, it } from 'vitest';
import { SubscriberConnection, type CommandCallbacks, type SubscriberConnectionHandler } from '../../src/pubsub/subscriber-connection.js';
import { fakeSockets, flushWrites, resp } from '../helpers/fake-upstream-socket.js';

// The subscriber role on the connection core (src/upstream/node-connection.ts) against a fake
// socket: (un)subscribe commands answered by one confirmation push per name (pushReplies), an
// error refusing a command whole, messages gathered into runs, an unsolicited SUNSUBSCRIBE, a
// desync. Liveness (PING, silence): subscriber-liveness.test.ts.

const HELLO_REPLY = '%1\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n';
const push = (...parts: string[]) => `>${parts.length}\r\n${parts.map((p) => `$${p.length}\r\n${p}\r\n`).join('')}`;
const confirm = (kind: string, name: string, count: number) => `>3\r\n$${kind.length}\r\n${kind}\r\n$${name.length}\r\n${name}\r\n:${count}\r\n`;

function subscriber() {
  const fake = fakeSockets();
  const log: string[] = [];
  const handler: SubscriberConnectionHandler = {
    ready: () => log.push('ready'),
    message: (_c, kind, pattern, channel, _frames, starts) => log.push(`${kind}:${pattern ?? ''}:${channel}×${starts.length}`),
    shardChannelDropped: (_c, channel) => log.push(`dropped:${channel}`),
    closed: (_c, reason) => log.push(`closed:${reason}`),
  };
  const conn = new SubscriberConnection({ host: '10.0.0.3', port: 6381, auth: null, connectTimeoutMs: 1000, commandTimeoutMs: 1000, pingIntervalMs: 60_000, openSocket: fake.open }, handler);
  return { conn, socket: fake.sockets[0]!, log };
}

function callbacks(log: string[], name: string): CommandCallbacks {
  return { confirmed: (i) => log.push(`${name} confirmed ${i}`), failed: (error, lost) => log.push(`${name} failed ${error}${lost ? ' (lost)' : ''}`) };
}

async function ready(s: ReturnType<typeof subscriber>): Promise<void> {
  s.socket.open();
  await flushWrites();
  expect(s.socket.takeWritten()).toBe(resp('HELLO', '3', 'SETNAME', 'respool-pubsub'));
  s.socket.reply(HELLO_REPLY);
  expect(s.conn.state).toBe('ready');
}

describe('SubscriberConnection on the connection core (fake socket, no server)', () => {
  it('a SUBSCRIBE of two names: one confirmation each, in order; messages before them are handed on first, as one run per name', async () => {
    const s = subscriber();
    s.conn.subscribe('subscribe', [Buffer.from('a'), Buffer.from('b')], callbacks(s.log, 'sub')); // before ready: waits
    await ready(s);
    await flushWrites();
    expect(s.socket.takeWritten()).toBe(resp('SUBSCRIBE', 'a', 'b'));
    expect(s.conn.pendingCount).toBe(1);
    s.socket.reply(confirm('subscribe', 'a', 1) + push('message', 'a', 'x') + push('message', 'a', 'y') + confirm('subscribe', 'b', 2) + push('message', 'b', 'z'));
    expect(s.log).toEqual(['ready', 'sub confirmed 0', 'message::a×2', 'sub confirmed 1', 'message::b×1']);
    expect(s.conn.pendingCount).toBe(0);
  });

  it('an error reply refuses the command whole; the next command is answered as usual', async () => {
    const s = subscriber();
    await ready(s);
    s.conn.subscribe('ssubscribe', [Buffer.from('{x}a'), Buffer.from('{y}b')], callbacks(s.log, 'ssub'));
    s.conn.subscribe('psubscribe', [Buffer.from('p*')], callbacks(s.log, 'psub'));
    s.socket.reply("-CROSSSLOT Keys in request don't hash to the same slot\r\n" + confirm('psubscribe', 'p*', 1) + push('pmessage', 'p*', 'p1', 'v'));
    expect(s.log.slice(1)).toEqual(["ssub failed CROSSSLOT Keys in request don't hash to the same slot", 'psub confirmed 0', 'pmessage:p*:p1×1']);
  });

  it('an SUNSUBSCRIBE nobody asked for is a dropped shard channel; a confirmation of another name is a desync that closes the connection, failing what waits', async () => {
    const s = subscriber();
    await ready(s);
    s.conn.subscribe('ssubscribe', [Buffer.from('s1')], callbacks(s.log, 'ssub'));
    s.socket.reply(confirm('sunsubscribe', 'gone', 0));
    expect(s.log.slice(1)).toEqual(['dropped:gone']);
    s.socket.reply(confirm('ssubscribe', 'other', 1));
    expect(s.conn.state).toBe('closed');
    expect(s.log.slice(2)).toEqual([
      'ssub failed connection to upstream 10.0.0.3:6381 was lost (unexpected ssubscribe push for "other" (expected ssubscribe)) (lost)',
      'closed:unexpected ssubscribe push for "other" (expected ssubscribe)',
    ]);
    s.conn.subscribe('subscribe', [Buffer.from('late')], callbacks(s.log, 'late'));
    expect(s.log.at(-1)).toMatch(/^late failed connection to 10\.0\.0\.3:6381 is closed .* \(lost\)$/);
  });

  it('UNSUBSCRIBEs asked for in one turn leave together, and are settled once every name is confirmed', async () => {
    const s = subscriber();
    await ready(s);
    s.conn.unsubscribeLater('unsubscribe', Buffer.from('a'));
    s.conn.unsubscribeLater('unsubscribe', Buffer.from('b'));
    let settled = false;
    s.conn.afterUnsubscribes(() => (settled = true));
    await flushWrites(); // the outbox leaves at the end of the turn (a microtask), then the write
    await flushWrites();
    expect(s.socket.takeWritten()).toBe(resp('UNSUBSCRIBE', 'a', 'b'));
    s.socket.reply(confirm('unsubscribe', 'a', 1));
    expect(settled).toBe(false); // the node still counts b
    s.socket.reply(confirm('unsubscribe', 'b', 0));
    expect(settled).toBe(true);
  });

  it('closed: what waits for UNSUBSCRIBEs runs after the pending commands failed, then the owner is told', async () => {
    const s = subscriber();
    await ready(s);
    s.conn.subscribe('subscribe', [Buffer.from('a')], callbacks(s.log, 'sub'));
    s.conn.unsubscribeLater('unsubscribe', Buffer.from('b')); // still in the outbox when the connection goes
    s.conn.afterUnsubscribes(() => s.log.push('settled'));
    s.socket.fail('connection closed by upstream');
    expect(s.log.slice(1)).toEqual([
      'sub failed connection to upstream 10.0.0.3:6381 was lost (connection closed by upstream) (lost)',
      'settled',
      'closed:connection closed by upstream',
    ]);
  });
});
