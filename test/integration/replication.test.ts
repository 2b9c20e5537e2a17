import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { RespDecoder, ReplyError, rawPipeline, type RespReply } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';

/** An empty RDB as respool sends it for a cluster: REDIS0009, EOF, 8 zero bytes (checksum not checked). */
const EMPTY_RDB = Buffer.concat([Buffer.from('REDIS0009'), Buffer.from([0xff]), Buffer.alloc(8)]);

/**
 * A client attached to the replication stream the way Valkey's tcl suite does it
 * (attach_to_replication_stream): SYNC on a bare socket, skip newlines, read `$<len>` and that
 * many snapshot bytes, then the stream's commands, decoded by the test harness's own decoder.
 */
class ReplicaTap {
  private buf = Buffer.alloc(0);
  private snapshotLength = -1;
  private readonly decoder = new RespDecoder();
  readonly commands: string[][] = [];
  preamble = '';
  snapshot: Buffer | null = null;
  closed = false;

  private constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('close', () => (this.closed = true));
    socket.on('error', () => {});
  }

  static async attach(port: number, command = 'SYNC', auth: string[] | null = null): Promise<ReplicaTap> {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const tap = new ReplicaTap(socket);
    if (auth !== null) socket.write(`AUTH ${auth.join(' ')}\r\n`); // its +OK lands in the preamble
    socket.write(`${command}\r\n`);
    await waitFor(() => tap.snapshot !== null || tap.preamble.startsWith('-'), 'the snapshot', 15_000);
    return tap;
  }

  private onData(chunk: Buffer): void {
    if (this.snapshot !== null) {
      this.decoder.push(chunk);
      let reply: RespReply | undefined;
      while ((reply = this.decoder.next()) !== undefined) this.commands.push((reply as RespReply[]).map(String));
      return;
    }
    this.buf = Buffer.concat([this.buf, chunk]);
    while (this.snapshotLength < 0) {
      while (this.buf[0] === 0x0a) this.buf = this.buf.subarray(1);
      const nl = this.buf.indexOf('\r\n');
      if (nl < 0) return;
      const line = this.buf.toString('latin1', 0, nl);
      this.buf = this.buf.subarray(nl + 2);
      this.preamble += `${line}\n`;
      if (line.startsWith('-')) return;
      if (line.startsWith('$')) this.snapshotLength = Number(line.slice(1));
    }
    if (this.buf.length < this.snapshotLength) return;
    this.snapshot = this.buf.subarray(0, this.snapshotLength);
    const rest = this.buf.subarray(this.snapshotLength);
    this.buf = Buffer.alloc(0);
    if (rest.length > 0) this.onData(rest);
  }

  /** Commands seen so far other than the PINGs and SELECTs a node adds of its own. */
  writes(): string[] {
    return this.commands
      .map(([name, ...args]) => [name!.toLowerCase(), ...args]) // as the tcl suite reads them
      .filter((c) => c[0] !== 'ping' && c[0] !== 'select')
      .map((c) => c.join(' '));
  }

  close(): void {
    this.socket.destroy();
  }
}

/** Upstream connections that are replicas named respool-replica, per node. */
async function replicaConnections(nodes: readonly ValkeyNode[]): Promise<number> {
  let n = 0;
  for (const node of nodes) {
    const list = String(await node.call('CLIENT', 'LIST', 'TYPE', 'replica'));
    n += list.split('\n').filter((l) => l.includes('name=respool-replica')).length;
  }
  return n;
}

describe('SYNC / PSYNC through respool in front of a 3-primary cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let writer: Valkey;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }], { dedicated: { maxReplicaStreams: 1 } });
    writer = clientFor(proxy);
  });

  afterAll(async () => {
    writer?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  it('sends an empty snapshot, then every primary\'s writes, a MULTI … EXEC group kept whole', async () => {
    await writer.set('before-attach', 'x'); // in a primary's snapshot, which respool does not relay
    const tap = await ReplicaTap.attach(proxy.address.port);
    try {
      expect(tap.preamble).toBe(`$${EMPTY_RDB.length}\n`);
      expect(tap.snapshot).toEqual(EMPTY_RDB);
      const keys = ['repl:a', 'repl:b', 'repl:c', 'repl:d', 'repl:e', 'repl:f']; // on all three primaries
      for (const k of keys) await writer.set(k, 'v');
      await writer.multi().set('{t}1', 'one').incr('{t}2').exec();
      await waitFor(() => tap.writes().length >= keys.length + 4, 'the writes', 5000);
      const writes = tap.writes();
      for (const k of keys) expect(writes).toContain(`set ${k} v`);
      expect(writes).not.toContain('set before-attach x');
      const multi = writes.indexOf('multi');
      expect(writes.slice(multi, multi + 4)).toEqual(['multi', 'set {t}1 one', 'incr {t}2', 'exec']);
      // Each primary selects database 0 after attaching; the merged stream carries it once.
      expect(tap.commands.filter((c) => c[0]!.toLowerCase() === 'select')).toEqual([['SELECT', '0']]);
      expect(await replicaConnections(cluster.nodes)).toBe(3); // one per primary
      // A second client past dedicated.maxReplicaStreams gets an error naming the bound.
      const second = await ReplicaTap.attach(proxy.address.port);
      expect(second.preamble).toMatch(/^-ERR respool: 1 clients are already attached .*dedicated\.maxReplicaStreams/);
      second.close();
    } finally {
      tap.close();
    }
    const deadline = Date.now() + 5000;
    while ((await replicaConnections(cluster.nodes)) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await replicaConnections(cluster.nodes)).toBe(0);
    // The bound is free again.
    const again = await ReplicaTap.attach(proxy.address.port, 'PSYNC ? -1');
    try {
      expect(again.preamble).toMatch(/^\+FULLRESYNC [0-9a-f]{40} 0\n\$18\n$/);
    } finally {
      again.close();
    }
  });

  it('inside MULTI: Valkey\'s error, and EXEC aborts', async () => {
    const replies = await rawPipeline(proxy.address.port, [['MULTI'], ['SYNC'], ['SET', '{m}k', 'v'], ['EXEC']]);
    expect(replies[0]).toBe('OK');
    expect(replies[1]).toBeInstanceOf(ReplyError);
    expect((replies[1] as ReplyError).message).toBe('ERR Command not allowed inside a transaction');
    expect(replies[2]).toBe('QUEUED');
    expect((replies[3] as ReplyError).message).toBe('EXECABORT Transaction discarded because of previous errors.');
  });
});

describe('a valkey-server made a replica of respool in front of a standalone server', () => {
  let upstream: ValkeyNode;
  let replica: ValkeyNode;
  let proxy: RespoolProxy;
  let writer: Valkey;

  beforeAll(async () => {
    upstream = await startStandalone();
    proxy = await startTestProxy([{ host: upstream.host, port: upstream.port }]);
    writer = clientFor(proxy);
    replica = await startStandalone();
  });

  afterAll(async () => {
    writer?.disconnect();
    await replica?.stop();
    await proxy?.close();
    await upstream?.stop();
  });

  it('gets the data written before (the snapshot, relayed byte for byte) and after (the stream)', async () => {
    for (let i = 0; i < 100; i++) await writer.set(`before:${i}`, `v${i}`);
    await writer.select(3);
    await writer.set('db3', 'three');
    await writer.select(0);
    expect(await replica.call('REPLICAOF', '127.0.0.1', String(proxy.address.port))).toBe('OK');
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && !/master_link_status:up/.test(String(await replica.call('INFO', 'replication')))) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(String(await replica.call('INFO', 'replication'))).toMatch(/master_link_status:up/);
    expect(await replica.call('GET', 'before:42')).toBe('v42');
    await writer.set('after', 'yes');
    await writer.hset('h', 'f', '1');
    const until = Date.now() + 5000;
    while ((await replica.call('GET', 'after')) !== 'yes' && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(await replica.call('GET', 'after')).toBe('yes');
    expect(await replica.call('HGET', 'h', 'f')).toBe('1');
    expect(await replica.call('DBSIZE')).toBe(102);
    const db3 = new Valkey({ host: replica.host, port: replica.port, db: 3 });
    try {
      expect(await db3.get('db3')).toBe('three');
    } finally {
      db3.disconnect();
    }
  });

  it('SYNC needs the permission Valkey asks for (@admin): a user without it gets NOPERM, as from Valkey', async () => {
    const guarded = await startTestProxy([{ host: upstream.host, port: upstream.port }], {
      mode: 'standalone',
      users: [{ name: 'default', rules: 'on nopass ~* &* +@all -@admin' }],
    });
    try {
      const replies = await rawPipeline(guarded.address.port, [['SYNC'], ['PSYNC', '?', '-1'], ['PING']]);
      expect((replies[0] as ReplyError).message).toBe("NOPERM User default has no permissions to run the 'sync' command");
      expect((replies[1] as ReplyError).message).toBe("NOPERM User default has no permissions to run the 'psync' command");
      expect(replies[2]).toBe('PONG'); // still an ordinary client
    } finally {
      await guarded.close();
    }
  });

  it('clients.idleTimeoutMs spares an attached client whose stream is quiet (as Valkey\'s timeout spares replicas)', async () => {
    const idle = await startTestProxy([{ host: upstream.host, port: upstream.port }], { mode: 'standalone', clients: { idleTimeoutMs: 200 } });
    const tap = await ReplicaTap.attach(idle.address.port);
    try {
      await new Promise((r) => setTimeout(r, 700));
      expect(tap.closed).toBe(false);
      await writer.set('after-quiet', '1');
      await waitFor(() => tap.writes().includes('set after-quiet 1'), 'the write', 5000);
    } finally {
      tap.close();
      await idle.close();
    }
  });

  it('the upstream killed while a client is attached: the client\'s connection ends (a lost master link), nothing hangs', async () => {
    await replica.call('REPLICAOF', 'NO', 'ONE');
    const tap = await ReplicaTap.attach(proxy.address.port);
    expect(tap.preamble).toMatch(/^\$\d+\n$/);
    expect(tap.snapshot!.subarray(0, 5).toString()).toBe('REDIS'); // the server's own snapshot, relayed
    upstream.kill('SIGKILL');
    await waitFor(() => tap.closed, 'the tap to close', 5000);
  });
});

describe('SYNC through respool under a namespace and colocation rules (issue 30)', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }], {
      users: [
        { name: 'default', password: 'adminpw' },
        { name: 'a', password: 'pa', keyPrefix: 'a:' },
        { name: 'b', password: 'pb', keyPrefix: 'b:' },
      ],
      colocate: [{ keys: 'q:*', tag: 'q' }],
    } as never);
  });

  afterAll(async () => {
    await proxy?.close();
    await cluster?.stop();
  });

  it('the stream names the client\'s keys, and leaves out another namespace\'s writes', async () => {
    const a = clientFor(proxy, { username: 'a', password: 'pa' } as never);
    const b = clientFor(proxy, { username: 'b', password: 'pb' } as never);
    const tap = await ReplicaTap.attach(proxy.address.port, 'SYNC', ['a', 'pa']);
    try {
      expect(tap.preamble).toBe(`+OK\n$${EMPTY_RDB.length}\n`);
      expect(tap.snapshot).toEqual(EMPTY_RDB); // a node's snapshot holds every namespace's keys: never relayed
      await b.set('k1', 'theirs');
      await b.multi().set('{t}x', '1').incr('{t}y').exec(); // b's group: left out whole
      await a.set('k1', 'mine');
      await a.multi().set('q:1', 'one').incr('q:2').exec(); // colocated under {q}, on one node
      await b.set('k2', 'theirs');
      await a.del('k1');
      await waitFor(() => tap.writes().includes('del k1'), 'the writes', 5000);
      await new Promise((r) => setTimeout(r, 200)); // anything else would have come by now
      // The primaries' streams merge in arrival order; a group stays whole.
      const writes = tap.writes();
      const multi = writes.indexOf('multi');
      expect(writes.slice(multi, multi + 4)).toEqual(['multi', 'set q:1 one', 'incr q:2', 'exec']);
      expect([...writes].sort()).toEqual(['del k1', 'exec', 'incr q:2', 'multi', 'set k1 mine', 'set q:1 one']);
    } finally {
      tap.close();
      a.disconnect();
      b.disconnect();
    }
  });
});
