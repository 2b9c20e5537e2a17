// Fleet membership (src/fleet/membership.ts) against in-process stand-ins for the peers on
// loopback (the answers and the silences are the test's to choose), with short timings.
import { afterEach, describe, expect, it } from 'vitest';
import net from 'node:net';
import { pino } from 'pino';
import { Membership, type Member } from '../../src/fleet/membership.js';
import { nodeId } from '../../src/fleet/cluster-emulation.js';
import { RateLimitedLog } from '../../src/util/rate-limited-log.js';
import { waitFor } from '../helpers/wait.js';

/** A stand-in peer: answers CLUSTER MYID with `id` (or stays silent), on a port kept across restarts. */
class FakePeer {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  silent = false;
  id = '';
  port = 0;

  async start(): Promise<void> {
    const server = net.createServer((s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
      s.on('error', () => {});
      s.on('data', () => {
        if (!this.silent) s.write(`$${this.id.length}\r\n${this.id}\r\n`);
      });
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as net.AddressInfo).port;
    if (this.id === '') this.id = nodeId({ host: '127.0.0.1', port: this.port });
    this.server = server;
  }

  /** Gone: the listener closed (dials refused) and every connection dropped. */
  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}

const events: Array<{ event: string; member?: string }> = [];
const log = pino({ level: 'info' }, { write: (line: string) => { events.push(JSON.parse(line)); } });
const memberships: Membership[] = [];

async function fleetOf(peer: FakePeer, timings: Partial<ConstructorParameters<typeof Membership>[0]['timings']> = {}): Promise<{ m: Membership; member: () => Member }> {
  const m = new Membership({
    self: { host: '127.0.0.1', port: 1 },
    peers: [{ host: '127.0.0.1', port: peer.port }],
    peersFrom: null,
    resolver: { resolve: async () => [] },
    timings: { checkMs: 20, checkTimeoutMs: 60, downAfterMs: 150, rejoinAfterMs: 200, resolveMs: 1000, ...timings },
    log,
    events: new RateLimitedLog(log, 0),
  });
  memberships.push(m);
  await m.start();
  return { m, member: () => m.members().find((x) => !x.self)! };
}

afterEach(() => {
  for (const m of memberships.splice(0)) m.stop();
  events.length = 0;
});

describe('fleet membership', () => {
  it('a peer that answers is alive; gone, it fails at once; back, it joins and gets slots after its hold, doubled after a second fail', async () => {
    const peer = new FakePeer();
    await peer.start();
    // 'joining' lasts one rejoin hold: 500 ms, then 1 s, so a stalled poll still sees it.
    const { m, member } = await fleetOf(peer, { downAfterMs: 3000, rejoinAfterMs: 500 });
    expect(member().state).toBe('alive');
    expect(m.liveIds()).toHaveLength(2);

    await peer.stop();
    const stoppedAt = Date.now();
    await waitFor(() => member().state === 'fail', 'fail', 2000, 5);
    // refused: no waiting for peerDownAfterMs (3 s here); the margin is for a loaded machine's probe timer
    expect(Date.now() - stoppedAt).toBeLessThan(2000);
    expect(m.liveIds()).toHaveLength(1);
    expect(events.filter((e) => e.event === 'member_down').map((e) => e.member)).toEqual([`127.0.0.1:${peer.port}`]);

    await peer.start();
    await waitFor(() => member().state === 'joining', 'joining', 2000, 5);
    // The member's own transition times: a poll sees 'joining' late on a loaded machine (it saw
    // 489 ms of a 500 ms hold once), the membership's clock does not.
    const joinedAt = member().stateSince;
    expect(m.liveIds()).toHaveLength(1); // no slots while it holds
    await waitFor(() => member().state === 'alive', 'alive again', 2000, 5);
    expect(member().stateSince - joinedAt).toBeGreaterThanOrEqual(500);

    await peer.stop();
    await waitFor(() => member().state === 'fail', 'fail again', 2000, 5);
    await peer.start();
    await waitFor(() => member().state === 'joining', 'joining again', 2000, 5);
    const rejoinedAt = member().stateSince;
    await waitFor(() => member().state === 'alive', 'alive after the doubled hold', 4000, 5);
    expect(member().stateSince - rejoinedAt).toBeGreaterThanOrEqual(1000); // 2 fails within 10 minutes: 2 × 500 ms
    expect(events.map((e) => e.event).filter((e) => e.startsWith('member_'))).toEqual(['member_up', 'member_down', 'member_back', 'member_up', 'member_down', 'member_back', 'member_up']);
    await peer.stop();
  });

  it('a silent peer is suspect (keeps its slots), then fails after peerDownAfterMs', async () => {
    const peer = new FakePeer();
    await peer.start();
    // Suspect from the first missed check until downAfterMs of silence: 600 ms leaves it suspect for
    // ~500 ms (at 150 ms, ~60 ms: a stalled poll saw it go straight to fail).
    const { m, member } = await fleetOf(peer, { downAfterMs: 600 });
    peer.silent = true;
    const silentAt = Date.now();
    await waitFor(() => member().state === 'suspect', 'suspect', 2000, 5);
    expect(m.liveIds()).toHaveLength(2);
    await waitFor(() => member().state === 'fail', 'fail', 2000, 5);
    expect(Date.now() - silentAt).toBeGreaterThanOrEqual(590);
    expect(member().lastError).toMatch(/no answer within 60 ms/);
    await peer.stop();
  });

  it('an address that answers as another node is not that member', async () => {
    const peer = new FakePeer();
    peer.id = 'f'.repeat(40);
    await peer.start();
    const { member } = await fleetOf(peer);
    expect(member().state).toBe('fail');
    expect(member().lastError).toMatch(/answers as node f{40}, not as [0-9a-f]{40}: its cluster.announce is not 127\.0\.0\.1:\d+/);
    await peer.stop();
  });
});
