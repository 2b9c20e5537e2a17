import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { spawn } from 'node:child_process';
import calculateSlot from 'cluster-key-slot';
import type { Valkey } from 'iovalkey';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { encodeCommand, type RespReply } from '../harness/raw-client.js';
import { RawConnection, rawExchange } from '../helpers/raw-resp.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import type { RespoolProxy } from '../../src/server.js';

type Command = Array<string | Buffer>;

const END = 'end-of-transcript';
const END_REPLY = `$${END.length}\r\n${END}\r\n`;

/**
 * Sends `commands` as one pipeline (after HELLO 3 for RESP3) and returns every frame that came
 * back, in order, as one string. An ECHO closes the transcript, so every sequence must leave
 * RESP2 subscribed mode before its end.
 */
async function transcript(port: number, protocol: 2 | 3, commands: Command[]): Promise<string> {
  const got = await rawExchange(port, [...commands, ['ECHO', END]], { resp3: protocol === 3, until: (bytes) => bytes.endsWith(END_REPLY) });
  return Buffer.from(got.slice(0, -END_REPLY.length), 'latin1').toString('utf8');
}

/** A confirmation or message frame as Valkey writes it (an independent oracle for a few checks). */
function frame(protocol: 2 | 3, ...items: Array<string | number>): string {
  let out = `${protocol === 2 ? '*' : '>'}${items.length}\r\n`;
  for (const item of items) out += typeof item === 'number' ? `:${item}\r\n` : `$${Buffer.byteLength(item)}\r\n${item}\r\n`;
  return out;
}

async function numsub(node: ValkeyNode, channel: string): Promise<number> {
  const reply = (await node.call('PUBSUB', 'NUMSUB', channel)) as RespReply[];
  return Number(reply[1]);
}

function metricValue(text: string, pattern: RegExp): number {
  const m = pattern.exec(text);
  return m ? Number(m[1]) : 0;
}

const BINARY = Buffer.from('bin\r\n\u0000é', 'utf8');

describe('pub/sub through respool, standalone', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;
  const clients: Valkey[] = [];

  beforeAll(async () => {
    server = await startStandalone();
    proxy = await startTestProxy([{ host: server.host, port: server.port }], { clients: { maxClients: 12_000 } });
  });

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await proxy?.close(0);
    await server?.stop();
  });

  function client(): Valkey {
    const c = clientFor(proxy);
    clients.push(c);
    return c;
  }

  it('answers a RESP2 sequence of (P|S)(UN)SUBSCRIBE byte for byte like valkey-server', async () => {
    const sequence: Command[] = [
      ['UNSUBSCRIBE'], ['PUNSUBSCRIBE', 'x'], ['SUNSUBSCRIBE'], ['UNSUBSCRIBE', 'a'],
      ['SUBSCRIBE', 'a', 'a', 'b', BINARY],
      ['PSUBSCRIBE', 'p*', 'q*'],
      ['PUNSUBSCRIBE', 'zz*'],
      ['SUNSUBSCRIBE'], // holds channels and patterns, no shard channel: nil name, shard count 0
      ['SSUBSCRIBE', 's1', 's2'], ['SSUBSCRIBE', 's1'],
      ['SUBSCRIBE', 'b'],
      ['UNSUBSCRIBE', 'b', 'nope', BINARY],
      ['PING'], ['PING', 'hi'], ['PING', 'a', 'b'],
      ['GET', 'x'], ['ECHO', 'e'], ['SET', 'k', 'v'], ['CLIENT', 'ID'],
      ['SUBSCRIBE'],
      ['UNSUBSCRIBE'], // one channel left: a deterministic mass unsubscribe
      ['PUNSUBSCRIBE', 'q*'], ['PUNSUBSCRIBE'],
      ['SUNSUBSCRIBE', 's2'],
      ['UNSUBSCRIBE'], ['PUNSUBSCRIBE'], // holds one shard channel only: nil names, count 0
      ['PING'],
      ['SUNSUBSCRIBE'],
      ['UNSUBSCRIBE'], ['SUNSUBSCRIBE', 's1'],
      ['PING'], ['PING', 'hi'],
    ];
    const direct = await transcript(server.port, 2, sequence);
    const proxied = await transcript(proxy.address.port, 2, sequence);
    expect(direct).toContain(frame(2, 'subscribe', 'b', 2)); // the oracle is what we think it is
    expect(direct).toContain("-NOSUB 'unsubscribe' command executed not in subscribed mode\r\n");
    expect(direct).toContain('*2\r\n$4\r\npong\r\n$0\r\n\r\n');
    expect(proxied).toBe(direct);
  });

  it('answers a RESP3 sequence byte for byte like valkey-server (pushes between ordinary replies)', async () => {
    const sequence: Command[] = [
      ['UNSUBSCRIBE'], ['SUNSUBSCRIBE', 'x'],
      ['SUBSCRIBE', 'a', BINARY], ['GET', 'missing'], ['PING'], ['PING', 'hi'],
      ['PSUBSCRIBE', 'p*'], ['ECHO', 'between'],
      ['SSUBSCRIBE', 's1', 's2'], ['SUNSUBSCRIBE', 's2', 's9'],
      ['UNSUBSCRIBE', BINARY], ['UNSUBSCRIBE'], ['PUNSUBSCRIBE', 'p*'],
      ['UNSUBSCRIBE'], ['PUNSUBSCRIBE'], ['SUNSUBSCRIBE'], ['SUNSUBSCRIBE'],
      ['SUBSCRIBE', 'c'], ['UNSUBSCRIBE', 'c'], ['UNSUBSCRIBE', 'c'],
    ];
    const direct = await transcript(server.port, 3, sequence);
    const proxied = await transcript(proxy.address.port, 3, sequence);
    expect(direct).toContain(frame(3, 'subscribe', 'a', 1));
    expect(direct).toContain('>3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n');
    expect(proxied).toBe(direct);
  });

  it('delivers PUBLISH from another client: channel and pattern messages, same bytes as valkey-server', async () => {
    const run = async (port: number, publisher: () => Promise<unknown>) => {
      const sub = await RawConnection.connect(port);
      sub.send('SUBSCRIBE', 'news');
      sub.send('PSUBSCRIBE', 'n*');
      const frames = [await sub.read(), await sub.read()];
      await publisher();
      frames.push(await sub.read(), await sub.read());
      sub.close();
      return frames.join('');
    };
    const direct = await run(server.port, () => server.call('PUBLISH', 'news', 'hello'));
    const publisher = client();
    const proxied = await run(proxy.address.port, () => publisher.publish('news', 'hello'));
    expect(direct).toBe(
      frame(2, 'subscribe', 'news', 1) + frame(2, 'psubscribe', 'n*', 2) +
      frame(2, 'message', 'news', 'hello') + frame(2, 'pmessage', 'n*', 'news', 'hello'),
    );
    expect(proxied).toBe(direct);
  });

  it('a burst over two channels and a pattern, interleaved: every message in publish order, same bytes as valkey-server (RESP2 and RESP3)', async () => {
    // The publisher's pipeline reaches respool's subscriber connection in few reads: runs of one
    // channel are joined (message-run.ts), and must not overtake the other channel's messages.
    const N = 400;
    const publishes: Command[] = [];
    for (let i = 0; i < N; i++) publishes.push(['PUBLISH', i % 7 === 3 ? 'burst:b' : i % 11 === 5 ? 'burst:xyz' : 'burst:a', `m${i}`]);
    const listen = async (port: number, protocol: 2 | 3) => {
      const c = await RawConnection.connect(port);
      if (protocol === 3) {
        c.send('HELLO', '3');
        await c.read();
      }
      c.send('SUBSCRIBE', 'burst:a', 'burst:b');
      c.send('PSUBSCRIBE', 'burst:x*');
      for (let i = 0; i < 3; i++) await c.read();
      return c;
    };
    const subs = [await listen(server.port, 2), await listen(proxy.address.port, 2), await listen(server.port, 3), await listen(proxy.address.port, 3)];
    const publisher = await RawConnection.connect(server.port);
    publisher.write(Buffer.concat(publishes.map((c) => encodeCommand(c))));
    const expectedFrames = N; // one frame a PUBLISH: a message, or the pattern's pmessage for burst:xyz
    const streams = await Promise.all(subs.map(async (c) => {
      const frames: string[] = [];
      for (let i = 0; i < expectedFrames; i++) frames.push(await c.read(10_000));
      c.close();
      return frames;
    }));
    publisher.close();
    const [direct2, proxied2, direct3, proxied3] = streams;
    expect(direct2!.filter((f) => f.includes('message')).length).toBe(expectedFrames);
    expect(proxied2).toEqual(direct2);
    expect(proxied3).toEqual(direct3);
    expect(direct3![0]!.startsWith('>')).toBe(true);
    expect(direct2![0]!.startsWith('*')).toBe(true);
  });

  it('works with iovalkey as the subscriber (RESP2 subscriber mode)', async () => {
    const sub = client();
    const got: string[] = [];
    sub.on('message', (ch: string, msg: string) => got.push(`${ch}:${msg}`));
    sub.on('pmessage', (pat: string, ch: string, msg: string) => got.push(`${pat}:${ch}:${msg}`));
    expect(await sub.subscribe('io1', 'io2')).toBe(2);
    expect(await sub.psubscribe('io*')).toBe(3);
    const pub = client();
    await pub.publish('io1', 'x');
    await pub.publish('io2', 'y');
    await waitFor(() => got.length === 4, 'iovalkey messages', 10_000);
    expect(got).toEqual(['io1:x', 'io*:io1:x', 'io2:y', 'io*:io2:y']);
    // (iovalkey's argument-less unsubscribe() never resolves while patterns are held, against
    // valkey-server too: name the channels.)
    expect(await sub.unsubscribe('io1', 'io2')).toBe(1);
    expect(await sub.punsubscribe('io*')).toBe(0);
    expect(await sub.ping()).toBe('PONG'); // left subscribed mode
  });

  it('RESP3: message pushes interleave with GET replies in a pipeline, never inside one, never before their confirmation', async () => {
    const setter = client();
    const values = Array.from({ length: 50 }, (_, i) => `value-${i}-${'x'.repeat(i * 37)}`);
    await Promise.all(values.map((v, i) => setter.set(`ik${i}`, v)));
    const sub = await RawConnection.connect(proxy.address.port);
    await sub.call('HELLO', '3');

    const publisher = client();
    let published = 0;
    let publishing = true;
    const pumping = (async () => {
      while (publishing) {
        const batch = [];
        for (let i = 0; i < 20; i++) batch.push(publisher.publish('i3', `m${published++}`));
        await Promise.all(batch);
        await sleep(1);
      }
    })();
    await sleep(20);
    // The subscribe is in the middle of the pipeline: its confirmation keeps its place.
    const requests: Command[] = [];
    for (let i = 0; i < 200; i++) {
      if (i === 100) requests.push(['SUBSCRIBE', 'i3']);
      requests.push(['GET', `ik${i % 50}`]);
    }
    // In 20 writes a few ms apart, so that messages arrive while GETs are owed.
    for (let i = 0; i < requests.length; i += 10) {
      sub.write(Buffer.concat(requests.slice(i, i + 10).map((r) => encodeCommand(r))));
      await sleep(3);
    }
    const frames: string[] = [];
    let replies = 0;
    while (replies < 201) {
      const f = await sub.read();
      frames.push(f);
      if (!f.startsWith('>3\r\n$7\r\nmessage\r\n')) replies++;
    }
    await sleep(100);
    publishing = false;
    await pumping;
    await sleep(100);
    sub.send('UNSUBSCRIBE', 'i3');
    for (;;) {
      const f = await sub.read();
      frames.push(f);
      if (f.startsWith('>3\r\n$11\r\nunsubscribe')) break;
    }
    sub.close();

    // Ordinary replies and the confirmation, in request order.
    const ordinary = frames.filter((f) => !f.startsWith('>3\r\n$7\r\nmessage\r\n'));
    const expected: string[] = [];
    for (let i = 0; i < 200; i++) {
      if (i === 100) expected.push(frame(3, 'subscribe', 'i3', 1));
      const v = values[i % 50]!;
      expected.push(`$${v.length}\r\n${v}\r\n`);
    }
    expected.push(frame(3, 'unsubscribe', 'i3', 0));
    expect(ordinary).toEqual(expected);
    // Messages: only after the confirmation, consecutive (none lost, none reordered).
    const confirmedAt = frames.indexOf(frame(3, 'subscribe', 'i3', 1));
    const messages = frames.map((f, i) => [f, i] as const).filter(([f]) => f.startsWith('>3\r\n$7\r\nmessage\r\n'));
    expect(messages.length).toBeGreaterThan(0);
    expect(messages[0]![1]).toBeGreaterThan(confirmedAt);
    const seq = messages.map(([f]) => Number(/\$\d+\r\nm(\d+)\r\n$/.exec(f)![1]));
    for (let i = 1; i < seq.length; i++) expect(seq[i]).toBe(seq[i - 1]! + 1);
    const interleaved = messages.filter(([, i]) => i < frames.length - 1 && i > confirmedAt && frames.slice(i + 1).some((f) => f.startsWith('$'))).length;
    console.log(`RESP3 interleave: ${messages.length} pushes, ${interleaved} of them between GET replies of the pipeline`);
  });

  it('RESP2 subscribed mode: refusals and PING replies match valkey-server, mode ends with the last unsubscribe', async () => {
    const sequence: Command[] = [
      ['SSUBSCRIBE', 'only-shard'],
      ['GET', 'x'], ['PUBLISH', 'a', 'b'], ['MULTI'], ['HELLO'], ['PING'], ['PING', 'x y'],
      ['SUNSUBSCRIBE'], ['GET', 'x'], ['PING'],
    ];
    expect(await transcript(proxy.address.port, 2, sequence)).toBe(await transcript(server.port, 2, sequence));
  });

  it('10,000 subscriber connections on one channel share one upstream subscription; exact message count', async () => {
    // The subscriber sockets live in a child process: in this process respool holds the 10,000
    // accepted sockets, and `ulimit -n` (checked below) applies to each process separately.
    const N = 10_000;
    const M = 20;
    const channel = 'fanout';
    const limit = await new Promise<number>((resolve) => {
      const sh = spawn('sh', ['-c', 'ulimit -n']);
      let out = '';
      sh.stdout.on('data', (d: Buffer) => (out += d.toString()));
      sh.on('close', () => resolve(Number(out.trim()) || 0));
    });
    const n = Math.min(N, limit - 200);
    expect(n).toBeGreaterThan(1000);
    const child = spawn(process.execPath, ['--input-type=module', '-e', FANOUT_CHILD], {
      env: { ...process.env, PORT: String(proxy.address.port), N: String(n), CHANNEL: channel, M: String(M) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: string[] = [];
    let buffered = '';
    child.stdout.on('data', (d: Buffer) => {
      buffered += d.toString();
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        lines.push(buffered.slice(0, nl));
        buffered = buffered.slice(nl + 1);
      }
    });
    try {
      const t0 = Date.now();
      await waitFor(() => lines.some((l) => l.startsWith('subscribed')), 'every subscriber confirmed', 90_000);
      const subscribeMs = Date.now() - t0;
      expect(await numsub(server, channel)).toBe(1); // one upstream subscription for all of them
      const rssBefore = process.memoryUsage().rss;
      const publisher = client();
      const t1 = Date.now();
      // One pipeline. PUBLISH counts receivers as one server would: respool's n subscribers, not
      // its one upstream subscription.
      const counts = await Promise.all(Array.from({ length: M }, (_, i) => publisher.publish(channel, `payload-${String(i).padStart(6, '0')}`)));
      expect(counts).toEqual(Array.from({ length: M }, () => n));
      const publishMs = Date.now() - t1;
      await waitFor(() => lines.some((l) => l.startsWith('done')), 'every subscriber got every message', 90_000);
      const deliverMs = Date.now() - t1;
      const done = lines.find((l) => l.startsWith('done'))!.split(' ');
      const [ok, bad] = [Number(done[1]), Number(done[2])];
      console.log(
        `fan-out: ${n} subscribers (ulimit -n ${limit}); subscribe all ${subscribeMs} ms; ` +
        `${M} messages published in ${publishMs} ms, all ${n * M} deliveries done in ${deliverMs} ms ` +
        `(${Math.round((n * M) / (deliverMs / 1000))} msg/s); rss +${Math.round((process.memoryUsage().rss - rssBefore) / 1e6)} MB`,
      );
      expect(bad).toBe(0);
      expect(ok).toBe(n);
    } finally {
      child.kill();
      await new Promise((r) => child.once('exit', r));
    }
    await waitFor(async () => (await numsub(server, channel)) === 0, 'upstream unsubscribed after the subscribers left', 15_000);
  }, 240_000);

  it('client disconnect: the upstream subscription goes once no client holds it', async () => {
    const a = await RawConnection.connect(proxy.address.port);
    const b = await RawConnection.connect(proxy.address.port);
    expect(await a.call('SUBSCRIBE', 'gone', 'gone2')).toBe(frame(2, 'subscribe', 'gone', 1));
    expect(await a.read()).toBe(frame(2, 'subscribe', 'gone2', 2));
    expect(await b.call('SUBSCRIBE', 'gone')).toBe(frame(2, 'subscribe', 'gone', 1));
    await waitFor(async () => (await numsub(server, 'gone')) === 1 && (await numsub(server, 'gone2')) === 1, 'upstream subscribed', 10_000);
    a.close();
    await waitFor(async () => (await numsub(server, 'gone2')) === 0, 'gone2 unsubscribed upstream', 10_000);
    expect(await numsub(server, 'gone')).toBe(1); // b still holds it
    const pub = client();
    await pub.publish('gone', 'still');
    expect(await b.read()).toBe(frame(2, 'message', 'gone', 'still'));
    b.close();
    await waitFor(async () => (await numsub(server, 'gone')) === 0, 'gone unsubscribed upstream', 10_000);
  });
});

describe('pub/sub through respool: a subscriber that stops reading', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    server = await startStandalone();
    proxy = await startTestProxy([{ host: server.host, port: server.port }], { pubsub: { maxOutputBytesPerClient: 256 * 1024 } });
  });

  afterAll(async () => {
    await proxy?.close(0);
    await server?.stop();
  });

  it('is disconnected past pubsub.maxOutputBytesPerClient while another subscriber keeps receiving promptly', async () => {
    const fast = net.connect(proxy.address.port, '127.0.0.1');
    await new Promise((r) => fast.once('connect', r));
    fast.write(encodeCommand(['SUBSCRIBE', 'flood']));
    await new Promise((r) => fast.once('data', r));
    // Each message carries its publish time; the fast subscriber records how late each arrived.
    const PAYLOAD = 16 * 1024;
    const frameBytes = frame(2, 'message', 'flood', 'x'.repeat(PAYLOAD)).length;
    let received = 0;
    let pending: Buffer = Buffer.alloc(0);
    let latencies: number[] = [];
    fast.on('data', (d: Buffer) => {
      pending = pending.length === 0 ? d : Buffer.concat([pending, d]);
      while (pending.length >= frameBytes) {
        const f = pending.subarray(0, frameBytes);
        pending = pending.subarray(frameBytes);
        const stamp = /\$\d+\r\n(\d+)-/.exec(f.subarray(frameBytes - PAYLOAD - 16, frameBytes - PAYLOAD + 20).toString('latin1'));
        if (stamp) latencies.push(Date.now() - Number(stamp[1]));
        received++;
      }
    });
    const publisher = await RawConnection.connect(server.port); // straight to the server
    /** 2000 messages of 16 KiB (32 MiB), 20 at a time a few ms apart; the fast subscriber's latencies. */
    const flood = async (): Promise<{ p50: number; p99: number; max: number }> => {
      received = 0;
      latencies = [];
      const TOTAL = 2000;
      for (let i = 0; i < TOTAL; i += 20) {
        for (let j = 0; j < 20; j++) {
          const stamp = `${Date.now()}-`;
          publisher.send('PUBLISH', 'flood', stamp + 'x'.repeat(PAYLOAD - stamp.length));
        }
        for (let j = 0; j < 20; j++) await publisher.read();
        await sleep(2);
      }
      await waitFor(() => received === TOTAL, 'fast subscriber got everything', 20_000);
      latencies.sort((a, b) => a - b);
      return { p50: latencies[latencies.length >> 1]!, p99: latencies[Math.floor(latencies.length * 0.99)]!, max: latencies[latencies.length - 1]! };
    };

    const alone = await flood();

    const slow = net.connect(proxy.address.port, '127.0.0.1');
    await new Promise((r) => slow.once('connect', r));
    slow.on('error', () => {});
    let slowClosed = false;
    slow.on('close', () => (slowClosed = true));
    slow.write(encodeCommand(['SUBSCRIBE', 'flood']));
    await new Promise((r) => slow.once('data', r));
    slow.pause(); // reads nothing more
    const withSlow = await flood();
    // respool let the slow one go (a paused socket does not see the close until it reads again).
    const dropped = async () => metricValue(await proxy.metrics.render(), /^respool_client_disconnects_total\{reason="pubsub_output"\} (\d+)/m);
    await waitFor(async () => (await dropped()) === 1, 'slow subscriber dropped', 5_000);
    slow.resume();
    await waitFor(() => slowClosed, 'slow subscriber closed', 5_000);
    console.log(
      `pubsub.maxOutputBytesPerClient 256 KiB: stalled subscriber dropped; fast subscriber latency (2000 x 16 KiB) ` +
      `alone p50/p99/max ${alone.p50}/${alone.p99}/${alone.max} ms, beside the stalled one ${withSlow.p50}/${withSlow.p99}/${withSlow.max} ms`,
    );
    expect(withSlow.p99).toBeLessThan(Math.max(500, 3 * alone.p99)); // loose: the machine is shared (held behind the stalled one: seconds)
    expect(await numsub(server, 'flood')).toBe(1); // the fast one still holds it
    fast.destroy();
    publisher.close();
    await waitFor(async () => (await numsub(server, 'flood')) === 0, 'flood unsubscribed upstream', 10_000);
  });
});

describe('sharded pub/sub through respool, 3-primary cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  const clients: Valkey[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const primaries = await cluster.primaries();
    proxy = await startTestProxy(primaries.map((p) => ({ host: p.host, port: p.port })));
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await proxy?.close(0);
    await cluster?.stop();
  });

  function client(): Valkey {
    const c = clientFor(proxy);
    clients.push(c);
    return c;
  }

  /** Two names whose slots belong to different primaries. */
  async function twoShards(): Promise<[string, string]> {
    const first = await cluster.primaryForSlot(calculateSlot('alpha'));
    for (let i = 0; ; i++) {
      const name = `beta${i}`;
      if ((await cluster.primaryForSlot(calculateSlot(name))).port !== first.port) return ['alpha', name];
    }
  }

  it('SSUBSCRIBE / SUNSUBSCRIBE over two slots: CROSSSLOT like Valkey', async () => {
    const [a, b] = await twoShards();
    const owner = await cluster.primaryForSlot(calculateSlot(a));
    const sequence: Command[] = [
      ['SSUBSCRIBE', a, b],
      ['SUNSUBSCRIBE', a, b], // not subscribed: CROSSSLOT comes first
      ['SSUBSCRIBE', a],
      ['SUNSUBSCRIBE', a, b],
      ['SUNSUBSCRIBE', a],
    ];
    const direct = await transcript(owner.port, 2, sequence);
    expect(direct).toContain("-CROSSSLOT Keys in request don't hash to the same slot\r\n");
    expect(await transcript(proxy.address.port, 2, sequence)).toBe(direct);
  });

  it('SPUBLISH reaches shard subscribers on every shard; one subscription per shard upstream', async () => {
    const [a, b] = await twoShards();
    const sub = await RawConnection.connect(proxy.address.port);
    expect(await sub.call('SSUBSCRIBE', `{${a}}1`, `{${a}}2`)).toBe(frame(2, 'ssubscribe', `{${a}}1`, 1));
    expect(await sub.read()).toBe(frame(2, 'ssubscribe', `{${a}}2`, 2));
    expect(await sub.call('SSUBSCRIBE', b)).toBe(frame(2, 'ssubscribe', b, 3));
    expect(await sub.call('SUBSCRIBE', 'classic')).toBe(frame(2, 'subscribe', 'classic', 1));
    const other = await RawConnection.connect(proxy.address.port);
    await other.call('HELLO', '3');
    expect(await other.call('SSUBSCRIBE', b)).toBe(frame(3, 'ssubscribe', b, 1));

    const pub = client();
    expect(await pub.spublish(`{${a}}2`, 'one')).toBe(1);
    expect(await pub.spublish(b, 'two')).toBe(1);
    await pub.publish('classic', 'three');
    // Three upstream connections: each one's messages in order, not necessarily across them.
    const got = [await sub.read(), await sub.read(), await sub.read()].sort();
    expect(got).toEqual([frame(2, 'smessage', `{${a}}2`, 'one'), frame(2, 'smessage', b, 'two'), frame(2, 'message', 'classic', 'three')].sort());
    expect(await other.read()).toBe(frame(3, 'smessage', b, 'two'));

    const ownerB = await cluster.primaryForSlot(calculateSlot(b));
    expect(await cluster.call(ownerB, 'PUBSUB', 'SHARDNUMSUB', b)).toEqual([b, 1]);
    expect(await sub.call('SUNSUBSCRIBE')).toBe(frame(2, 'sunsubscribe', `{${a}}1`, 2));
    expect(await sub.read()).toBe(frame(2, 'sunsubscribe', `{${a}}2`, 1));
    expect(await sub.read()).toBe(frame(2, 'sunsubscribe', b, 0));
    expect(await cluster.call(ownerB, 'PUBSUB', 'SHARDNUMSUB', b)).toEqual([b, 1]); // `other` holds it
    other.close();
    await waitFor(async () => {
      const r = (await cluster.call(ownerB, 'PUBSUB', 'SHARDNUMSUB', b)) as RespReply[];
      return r[1] === 0;
    }, 'shard channel released upstream', 10_000);
    expect(await sub.call('UNSUBSCRIBE')).toBe(frame(2, 'unsubscribe', 'classic', 0));
    sub.close();
  });
});

/**
 * The fan-out test's subscribers: N sockets, each SUBSCRIBEs CHANNEL; prints "subscribed" once
 * all are confirmed, then "done <ok> <bad>" once each socket has received exactly the
 * confirmation and M messages `payload-000000` … in order (byte-exact), or after 120 s.
 */
const FANOUT_CHILD = `
import net from 'node:net';
const port = Number(process.env.PORT), n = Number(process.env.N), m = Number(process.env.M), ch = process.env.CHANNEL;
const bulk = (s) => '$' + Buffer.byteLength(s) + '\\r\\n' + s + '\\r\\n';
const confirm = Buffer.from('*3\\r\\n' + bulk('subscribe') + bulk(ch) + ':1\\r\\n');
let expected = confirm.toString('latin1');
for (let i = 0; i < m; i++) expected += '*3\\r\\n' + bulk('message') + bulk(ch) + bulk('payload-' + String(i).padStart(6, '0'));
const expectedBuf = Buffer.from(expected, 'latin1');
const sockets = [];
let confirmed = 0, ok = 0, bad = 0;
const request = Buffer.from('*2\\r\\n' + bulk('SUBSCRIBE') + bulk(ch));
function open() {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const st = { chunks: [], bytes: 0, finished: false, confirmed: false };
    s.on('connect', () => { s.write(request); resolve(); });
    s.on('error', (e) => { if (!st.finished) { st.finished = true; bad++; } reject(e); });
    s.on('data', (d) => {
      if (st.finished) return;
      st.chunks.push(d); st.bytes += d.length;
      if (!st.confirmed && st.bytes >= confirm.length) { st.confirmed = true; confirmed++; if (confirmed === n) console.log('subscribed'); }
      if (st.bytes >= expectedBuf.length) {
        st.finished = true;
        if (Buffer.concat(st.chunks).equals(expectedBuf)) ok++; else bad++;
        st.chunks = [];
        if (ok + bad === n) console.log('done ' + ok + ' ' + bad);
      }
    });
    sockets.push(s);
  });
}
for (let i = 0; i < n; i += 500) {
  const batch = [];
  for (let j = i; j < Math.min(n, i + 500); j++) batch.push(open());
  await Promise.all(batch);
}
setTimeout(() => { console.log('done ' + ok + ' ' + (n - ok)); process.exit(0); }, 120000).unref();
setInterval(() => {}, 1000);
`;
