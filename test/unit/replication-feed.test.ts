import { describe, expect, it } from 'vitest';
import { ReplicationFeed, type ReplicationFeedHandler } from '../../src/upstream/replication-feed.js';
import { fakeSockets, flushWrites, resp } from '../helpers/fake-upstream-socket.js';

// The replication feed as a role on the connection core (src/upstream/node-connection.ts), against
// a fake socket: the core's handshake, SYNC after it, the preamble and snapshot read raw (not RESP
// frames), the command stream framed by the core, a refusal told as the node's, close() told to nobody.

function feed() {
  const fake = fakeSockets();
  const log: string[] = [];
  const handler: ReplicationFeedHandler = {
    snapshotStarted: (_f, length) => log.push(`start ${length}`),
    snapshotBytes: (_f, bytes) => log.push(`bytes ${bytes.toString('latin1')}`),
    snapshotEnded: () => log.push('end'),
    unit: (_f, commands) => log.push(`unit ${commands.map((c) => c.toString('latin1').split('\r\n').filter((_, i) => i % 2 === 0 && i > 0).join(' ')).join(' | ')}`),
    failed: (_f, reason, refused) => log.push(`failed ${reason}${refused ? ' (refused by the node)' : ''}`),
  };
  const f = new ReplicationFeed({ host: '10.0.0.4', port: 6382, auth: { username: 'u', password: 'p' }, connectTimeoutMs: 1000, openSocket: fake.open }, handler);
  return { f, socket: fake.sockets[0]!, log };
}

describe('ReplicationFeed on the connection core (fake socket, no server)', () => {
  it('AUTH and SETNAME, then SYNC; a snapshot over several reads; then commands, a MULTI … EXEC group whole', async () => {
    const { socket, log } = feed();
    socket.open();
    await flushWrites();
    expect(socket.takeWritten()).toBe(resp('AUTH', 'u', 'p') + resp('CLIENT', 'SETNAME', 'respool-replica'));
    socket.reply('+OK\r\n');
    await flushWrites();
    expect(socket.takeWritten()).toBe(''); // SYNC waits for every handshake reply
    socket.reply('+OK\r\n');
    await flushWrites();
    expect(socket.takeWritten()).toBe(resp('SYNC'));
    socket.reply('\n\n$6\r\nRED'); // keep-alives, the length, part of the payload (no CRLF after it)
    socket.reply('IS' + 'X' + resp('set', 'k', 'v') + resp('multi') + resp('incr', 'n'));
    socket.reply(resp('exec'));
    expect(log).toEqual(['start 6', 'bytes RED', 'bytes ISX', 'end', 'unit set k v', 'unit multi | incr n | exec']);
  });

  it("a refused SYNC is the node's answer; a refused AUTH too; close() tells nobody", async () => {
    const a = feed();
    a.socket.open();
    a.socket.reply('+OK\r\n+OK\r\n');
    a.socket.reply('-NOPERM this user has no permissions to run the \'sync\' command\r\n');
    expect(a.log).toEqual(["failed NOPERM this user has no permissions to run the 'sync' command (refused by the node)"]);
    const b = feed();
    b.socket.open();
    b.socket.reply('-WRONGPASS invalid username-password pair or user is disabled.\r\n');
    expect(b.log).toEqual(['failed WRONGPASS invalid username-password pair or user is disabled. (refused by the node)']);
    const c = feed();
    c.socket.open();
    c.f.close();
    c.socket.fail('connection closed by upstream');
    expect(c.log).toEqual([]);
    expect(c.socket.destroyed).toBe(true);
  });
});
