// The redirect follower (routing/redirect-follower.ts), the one rule for MOVED and ASK on every
// path to a node: MOVED patches the topology and asks for a refresh, ASK leaves the topology
// alone, a request redirected cluster.maxRedirects times gets the error, "MOVED 3999 :6381" means
// the replying node's host, and each redirect is counted once.
import { describe, expect, it } from 'vitest';
import { RedirectFollower } from '../../src/routing/redirect-follower.js';
import { Topology, type ClusterNode } from '../../src/cluster/topology.js';
import type { TopologyChange } from '../../src/cluster/topology-refresher.js';

function node(port: number): ClusterNode {
  return { id: `n${port}`, host: '10.0.0.9', port, address: `10.0.0.9:${port}`, role: 'primary', health: 'online', zone: null, replicationOffset: 0 };
}

function setup(maxRedirects = 3) {
  const refresher = {
    current: new Topology('cluster', [
      { primary: node(7000), replicas: [], slots: [[0, 8191]] },
      { primary: node(7001), replicas: [], slots: [[8192, 16383]] },
    ], 'test') as Topology | null,
    installs: [] as TopologyChange[],
    refreshes: 0,
    install(topology: Topology, change: TopologyChange) {
      this.current = topology;
      this.installs.push(change);
    },
    requestRefresh() {
      this.refreshes++;
    },
  };
  const counted: string[] = [];
  const counter = (name: string) => ({ inc: () => counted.push(name) });
  const metrics = {
    redirectCounter: (kind: string) => counter(`redirect ${kind}`),
    commandErrorCounter: (command: string, kind: string) => counter(`${command} ${kind}`),
  };
  const follower = new RedirectFollower(refresher as never, maxRedirects, metrics as never);
  return { follower, refresher, counted };
}

const reply = (text: string) => Buffer.from(`-${text}\r\n`);

describe('RedirectFollower', () => {
  it('MOVED: the step to the new owner; the topology learns it at once and a refresh is asked for, once', () => {
    const { follower, refresher, counted } = setup();
    const step = follower.step(reply('MOVED 100 10.0.0.9:7002'), '10.0.0.9:7000', 0, 'get');
    expect(step).toEqual({ kind: 'moved', slot: 100, host: '10.0.0.9', port: 7002 });
    expect(refresher.current!.primaryForSlot(100)?.address).toBe('10.0.0.9:7002');
    expect(refresher.installs).toEqual(['moved']);
    expect(refresher.refreshes).toBe(1);
    expect(counted).toEqual(['redirect moved']);
  });

  it('ASK: the step to the target, ASKING being the caller\'s; the topology stays and no refresh is asked for', () => {
    const { follower, refresher, counted } = setup();
    const before = refresher.current;
    expect(follower.step(reply('ASK 9000 10.0.0.9:7002'), '10.0.0.9:7001', 1, 'set')).toEqual({ kind: 'ask', slot: 9000, host: '10.0.0.9', port: 7002 });
    expect(refresher.current).toBe(before);
    expect(refresher.refreshes).toBe(0);
    expect(counted).toEqual(['redirect ask']);
  });

  it('the hop bound: the redirect that would exceed cluster.maxRedirects gets the error, counted as redirect_limit', () => {
    const { follower, refresher, counted } = setup(2);
    expect(follower.step(reply('MOVED 100 10.0.0.9:7002'), '10.0.0.9:7000', 1, 'get')?.kind).toBe('moved');
    const limit = follower.step(reply('MOVED 100 10.0.0.9:7000'), '10.0.0.9:7002', 2, 'get');
    expect(limit?.kind).toBe('limit');
    expect(limit!.kind === 'limit' && limit!.error.toString()).toMatch(/^-ERR .*GET.*2/);
    expect(refresher.installs).toEqual(['moved']); // the refused one teaches nothing
    expect(counted).toEqual(['redirect moved', 'redirect moved', 'get redirect_limit']);
  });

  it('no host in the redirect: the replying node\'s host; from a subscriber\'s error text too', () => {
    const { follower } = setup();
    expect(follower.step(reply('MOVED 3999 :6381'), '10.1.2.3:7000', 0, 'get')).toEqual({ kind: 'moved', slot: 3999, host: '10.1.2.3', port: 6381 });
    expect(follower.stepForText('MOVED 5 [::1]:7005', '10.1.2.3:7000', 0, 'ssubscribe')).toEqual({ kind: 'moved', slot: 5, host: '::1', port: 7005 });
  });

  it('anything else is not a redirect: ordinary errors, TRYAGAIN (the router retries it), replies that are no error', () => {
    const { follower, refresher, counted } = setup();
    expect(follower.step(reply('ERR wrong number of arguments'), '10.0.0.9:7000', 0, 'get')).toBeNull();
    expect(follower.step(reply('TRYAGAIN Multiple keys request during rehashing of slot'), '10.0.0.9:7000', 0, 'mget')).toBeNull();
    expect(follower.step(Buffer.from('+MOVED 1 a:1\r\n'), '10.0.0.9:7000', 0, 'get')).toBeNull();
    expect(refresher.refreshes).toBe(0);
    expect(counted).toEqual([]);
  });

  it('a replica that answered MOVED to a read: counted, a refresh asked for, and bounded like any redirect', () => {
    const { follower, refresher, counted } = setup(1);
    expect(follower.replicaMoved(0, 'get')).toBeNull();
    expect(follower.replicaMoved(1, 'get')?.toString()).toMatch(/^-ERR /);
    expect(refresher.refreshes).toBe(2);
    expect(counted).toEqual(['redirect moved', 'redirect moved', 'get redirect_limit']);
  });
});
