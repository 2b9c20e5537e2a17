// The cluster of bench/soak.mjs and what its faults do to it: 3 primaries + 3 replicas from the
// harness (build/harness/valkey-processes.js), one primary behind a fault relay
// (build/harness/fault-relay.js: it announces the relay's port with cluster-announce-port, so
// respool reaches it through the relay while the cluster bus goes direct), and by hand what the
// harness has no call for: a view that knows the relayed node by its announced port, a stability
// check that accepts it, moving slots under traffic, a node added and removed, a kill that lets
// the replica catch up first.
//
// Every command here goes to a node's real port on a fresh connection with a timeout; nothing
// is sent to a node this module froze.
import path from 'node:path';
import { ROOT_DIR, log, sleep } from './common.mjs';
import { parseClientList } from './upstream-census.mjs';

const harness = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const { rawCall, rawPipeline, parseInfo, ReplyError } = await import(path.join(ROOT_DIR, 'build/harness/raw-client.js'));
const { FaultRelay } = await import(path.join(ROOT_DIR, 'build/harness/fault-relay.js'));

const SLOTS = 16384;
const CALL = { connectTimeoutMs: 1000, timeoutMs: 5000 };

/** One command to a node's real port; an error reply throws, naming the node and the command. */
export async function must(node, ...args) {
  const r = await rawCall(node.port, args, CALL);
  if (r instanceof ReplyError) throw new Error(`${node.address} ${args.join(' ')}: ${r.message}`);
  return r;
}

async function until(what, timeoutMs, check, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  let last = null;
  for (;;) {
    try {
      last = await check();
      if (last === true || last === null) return;
    } catch (e) {
      last = e.message;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms (${last})`);
    await sleep(everyMs);
  }
}

const offsetOf = (info, field) => Number(parseInfo(info)[field] ?? -1);

export class SoakCluster {
  /** Starts the cluster and puts its first shard's primary behind a fault relay. */
  static async start({ nodeTimeoutMs }) {
    const clusterArgs = ['--cluster-require-full-coverage', 'no'];
    const cluster = await harness.startCluster({ primaries: 3, replicasPerPrimary: 1, nodeTimeoutMs, args: clusterArgs, startTimeoutMs: 60_000 });
    const sc = new SoakCluster(cluster, nodeTimeoutMs, clusterArgs);
    const far = (await cluster.shards())[0].primary;
    sc.far = far;
    sc.relay = await FaultRelay.start({ host: far.host, port: far.port });
    await must(far, 'CONFIG', 'SET', 'cluster-announce-port', String(sc.relay.port));
    await until('every node names the relayed primary by the relay port', 30_000, async () => {
      for (const n of sc.live()) if (!JSON.stringify(await must(n, 'CLUSTER', 'SLOTS')).includes(String(sc.relay.port))) return `${n.address} not yet`;
      return true;
    });
    await sc.waitStable(60_000);
    return sc;
  }

  constructor(cluster, nodeTimeoutMs, clusterArgs) {
    this.cluster = cluster;
    this.nodeTimeoutMs = nodeTimeoutMs;
    this.clusterArgs = clusterArgs;
    /** Nodes added by addNode() and not removed yet. */
    this.extra = [];
    /** Ports of the nodes stopped with SIGSTOP right now. */
    this.frozen = new Set();
  }

  get nodes() {
    return [...this.cluster.nodes, ...this.extra];
  }

  /** Running and not frozen. */
  live() {
    return this.nodes.filter((n) => n.alive && !this.frozen.has(n.port));
  }

  /** Seed addresses for respool: every node but the relayed one, by its real port. */
  seeds() {
    return this.cluster.nodes.filter((n) => n !== this.far).map((n) => n.address);
  }

  /** The node a CLUSTER NODES port names (the relay's port is the relayed primary's). */
  byAnnounced(port) {
    if (this.relay && port === this.relay.port) return this.far;
    return this.nodes.find((n) => n.port === port) ?? null;
  }

  /** CLUSTER NODES of the first live node, each entry with its node (or null). */
  async view() {
    let lastErr = new Error('no live node');
    for (const n of this.live()) {
      try {
        return harness.parseClusterNodes(String(await must(n, 'CLUSTER', 'NODES'))).map((v) => ({ ...v, node: this.byAnnounced(v.port) }));
      } catch (e) {
        lastErr = e;
      }
    }
    throw lastErr;
  }

  /** Live shards: { id, primary, slots, replicas } (ordered by first slot). */
  async shards() {
    const views = await this.view();
    const ok = (v) => v.node && v.node.alive && !v.flags.has('fail');
    const shards = views.filter((v) => v.flags.has('master') && ok(v)).map((v) => ({ id: v.id, primary: v.node, slots: v.slots, replicas: [] }));
    for (const v of views) if (v.flags.has('slave') && ok(v)) shards.find((s) => s.id === v.masterId)?.replicas.push(v.node);
    return shards.sort((a, b) => (a.slots[0]?.[0] ?? SLOTS) - (b.slots[0]?.[0] ?? SLOTS));
  }

  /** null when every live node agrees on a healthy cluster, else the first reason it is not. */
  async checkStable() {
    let signature;
    for (const n of this.live()) {
      const [info, nodesText, repl] = await rawPipeline(n.port, [['CLUSTER', 'INFO'], ['CLUSTER', 'NODES'], ['INFO', 'replication']], CALL);
      const ci = parseInfo(info);
      if (ci.cluster_state !== 'ok') return `${n.address}: cluster_state ${ci.cluster_state}`;
      if (Number(ci.cluster_slots_ok) !== SLOTS) return `${n.address}: ${ci.cluster_slots_ok} slots ok`;
      if (/\[\d+-[<>]-/.test(String(nodesText))) return `${n.address}: a slot is migrating or importing`;
      const views = harness.parseClusterNodes(String(nodesText)).map((v) => ({ ...v, node: this.byAnnounced(v.port) }));
      for (const v of views) {
        if (!v.node) return `${n.address} knows an unknown node at port ${v.port}`;
        const bad = ['fail', 'fail?', 'handshake', 'noaddr'].filter((f) => v.flags.has(f));
        if (v.node.alive && bad.length) return `${n.address} sees ${v.node.address} as ${bad.join(',')}`;
        if (!v.node.alive && !v.flags.has('fail')) return `${n.address} has not flagged dead ${v.node.address} as fail`;
      }
      const owners = views.filter((v) => v.flags.has('master') && !v.flags.has('fail') && v.slots.length).map((v) => `${v.id}:${v.slots.map((r) => r.join('-')).join(',')}`).sort().join(' ');
      if (signature === undefined) signature = owners;
      else if (owners !== signature) return `${n.address}: its slot owners differ from the first node's`;
      const r = parseInfo(repl);
      if (r.role === 'slave' && r.master_link_status !== 'up') return `${n.address}: replica link ${r.master_link_status}`;
    }
    return null;
  }

  async waitStable(timeoutMs = 60_000) {
    await until('cluster stable', timeoutMs, () => this.checkStable(), 200);
  }

  /** The relayed primary's shard faults: the relay's settings (see FaultRelay.set). */
  setLink(faults) {
    this.relay.set(faults);
  }

  // ---------------------------------------------------------------- primaries stopped

  /**
   * Writes paused on `primary` (CLIENT PAUSE WRITE) until `replica` has its whole replication
   * stream, then SIGKILL: Valkey replicates asynchronously, and a write acknowledged in the last
   * instant before a kill may be gone from the promoted replica — Valkey's own behaviour, not what
   * this bench measures. The paused writes fail with the connection ("may or may not have run").
   */
  async killAfterCatchUp(primary, replica) {
    await must(primary, 'CLIENT', 'PAUSE', 5000, 'WRITE');
    await until(`${replica.address} caught up with ${primary.address}`, 4000, async () => {
      const want = offsetOf(await must(primary, 'INFO', 'replication'), 'master_repl_offset');
      const have = offsetOf(await must(replica, 'INFO', 'replication'), 'slave_repl_offset');
      return have >= want ? true : `${have} < ${want}`;
    }, 5).catch((e) => log(`soak: ${e.message}; killing anyway`));
    await this.cluster.killNode(primary);
  }

  /** Waits until `node` (alive) is a primary in every live node's view. */
  async waitPromoted(node, timeoutMs) {
    await until(`${node.address} promoted`, timeoutMs, async () => {
      const me = harness.parseClusterNodes(String(await must(node, 'CLUSTER', 'NODES'))).find((v) => v.flags.has('myself'));
      return me?.flags.has('master') ? true : `flags ${[...(me?.flags ?? [])].join(',')}`;
    }, 200);
  }

  async restart(node) {
    await this.cluster.restartNode(node);
  }

  freeze(node) {
    this.frozen.add(node.port);
    node.kill('SIGSTOP');
  }

  thaw(node) {
    node.kill('SIGCONT');
    this.frozen.delete(node.port);
  }

  // ---------------------------------------------------------------- slots moved

  /** Moves `slots` (numbers) from one primary to another under traffic (IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE). */
  async moveSlots(from, to, slots) {
    const fromId = String(await must(from, 'CLUSTER', 'MYID'));
    const toId = String(await must(to, 'CLUSTER', 'MYID'));
    const others = (await this.shards()).map((s) => s.primary).filter((p) => p !== from && p !== to);
    let keys = 0;
    for (const slot of slots) {
      await must(to, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
      await must(from, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
      for (;;) {
        const batch = await must(from, 'CLUSTER', 'GETKEYSINSLOT', slot, 100);
        if (!Array.isArray(batch) || batch.length === 0) break;
        await must(from, 'MIGRATE', to.host, to.port, '', 0, 10_000, 'KEYS', ...batch);
        keys += batch.length;
      }
      await must(to, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId);
      // A primary that gave away its last slot may already have turned replica of the new owner.
      await must(from, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId).catch((e) => {
        if (!/only with masters/.test(e.message)) throw e;
      });
      for (const o of others) await must(o, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId).catch(() => undefined); // gossip carries it too
    }
    return keys;
  }

  // ---------------------------------------------------------------- a node added and removed

  /** Starts an empty cluster node and introduces it (CLUSTER MEET); resolves once every live node knows it. */
  async addNode() {
    const node = await harness.startStandalone({
      // cluster-allow-replica-migration no: emptied again, it stays a primary (not a replica of the slots' new owner).
      args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', String(this.nodeTimeoutMs),
        '--cluster-allow-replica-migration', 'no', ...this.clusterArgs],
    });
    this.extra.push(node);
    const anyPrimary = (await this.shards())[0].primary;
    await must(node, 'CLUSTER', 'MEET', '127.0.0.1', anyPrimary.port);
    await until(`every node knows ${node.address}`, 30_000, async () => {
      for (const n of this.live()) {
        const v = harness.parseClusterNodes(String(await must(n, 'CLUSTER', 'NODES')));
        if (v.length !== this.live().length || v.some((x) => x.flags.has('handshake'))) return `${n.address} knows ${v.length}`;
      }
      return true;
    }, 200);
    return node;
  }

  /** Forgets an added node (it must own no slot) on every other node, then stops it. */
  async removeNode(node) {
    const id = String(await must(node, 'CLUSTER', 'MYID'));
    for (const n of this.live()) if (n !== node) await must(n, 'CLUSTER', 'FORGET', id);
    await node.stop();
    this.extra = this.extra.filter((n) => n !== node);
  }

  /** Every live node's client connections by name (CLIENT LIST, less this call's own and the replication links): { address: { total, byName } }. */
  async clientCensus() {
    const out = {};
    await Promise.all(this.live().map(async (n) => {
      try {
        const [list, id] = await rawPipeline(n.port, [['CLIENT', 'LIST'], ['CLIENT', 'ID']], { connectTimeoutMs: 500, timeoutMs: 1000 });
        const byName = {};
        let total = 0;
        for (const c of parseClientList(list)) {
          if (Number(c.id) === id || /[SM]/.test(c.flags)) continue; // this call's own; replication links
          total++;
          byName[c.name || '(unnamed)'] = (byName[c.name || '(unnamed)'] ?? 0) + 1;
        }
        out[n.address] = { total, byName };
      } catch {
        /* a node busy or gone this instant: left out of this sample */
      }
    }));
    return out;
  }

  async stop() {
    for (const port of this.frozen) this.nodes.find((n) => n.port === port)?.kill('SIGCONT');
    await this.relay?.close().catch(() => undefined);
    for (const n of this.extra) await n.stop().catch(() => undefined);
    await this.cluster.stop();
  }
}
