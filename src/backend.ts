import type { Logger } from 'pino';
import type { RespoolConfig } from './config/types.js';
import { decodeReply, RespError } from './resp/decode.js';
import { TopologyRefresher } from './cluster/topology-refresher.js';
import type { Topology } from './cluster/topology.js';
import { UpstreamPools } from './upstream/upstream-pools.js';
import { Router } from './routing/router.js';
import { RunningScripts } from './scripts/running-scripts.js';
import { ScriptCache } from './scripts/script-cache.js';
import { TrackedKeys } from './client/tracked-keys.js';
import { NearCache } from './nearcache/near-cache.js';
import { ClientSession } from './session/client-session.js';
import type { ServerContext, UpstreamSide } from './client/server-context.js';
import type { Tenant } from './tenants/tenant.js';
import type { Metrics } from './metrics/metrics.js';
import type { RateLimitedLog } from './util/rate-limited-log.js';
import { HotKeys, type HotKeysDeps } from './hotkeys/hot-keys.js';
import type { ReadRouting } from './routing/read-strategy.js';
import { LeasePools } from './upstream/lease-pools.js';
import { PubSubHub } from './pubsub/hub.js';
import { ParkedPops } from './parking/parked-pops.js';
import { HelloIdentity } from './client/hello-identity.js';
import { FunctionFlags } from './scripts/function-flags.js';
import type { UserDirectory } from './acl/user-directory.js';
import { IdentityMirror, isNodeDenial, mirrorVerdict } from './upstream/identity-mirror.js';
import { asSeenByClient } from './acl/upstream-identity.js';
import { clientInfoLine } from './handlers/client-commands.js';

/** Valkey's default `databases`: SELECT's bound when the upstream does not say. */
const DEFAULT_DATABASES = 16;

/** What a backend shares with the rest of the proxy (and with the other backends). */
export interface BackendDeps {
  metrics: Metrics;
  events: RateLimitedLog;
  log: Logger;
  reads: ReadRouting;
  users: UserDirectory;
  /** The fleet's shared state for hot keys (the main upstreams only), made once pools and topology exist. */
  fleet?: (refresher: TopologyRefresher, pools: UpstreamPools) => HotKeysDeps['fleet'];
}

/** The ServerContext role that belongs to one set of upstreams. */
export type BackendContext = UpstreamSide;

/**
 * One set of upstreams and everything respool keeps for it: pools of shared links, the topology
 * and its refresh, the router, leased connections, multiplexed subscriptions, hot keys, the users
 * mirrored on its nodes, what its nodes say they are. The main upstreams (config.upstreams) are
 * one backend; a tenant with upstreams of its own (tenants[].upstreams) is another, built from
 * the same code, so everything respool does works there as on the main one (docs/tenants.md).
 * `config` is the proxy's, with this backend's upstreams, mode, upstreamAuth and upstreamTls.
 */
export class Backend {
  readonly pools: UpstreamPools;
  readonly refresher: TopologyRefresher;
  readonly router: Router;
  readonly hotKeys: HotKeys;
  readonly dedicated: LeasePools;
  readonly parking: ParkedPops;
  readonly pubsub: PubSubHub;
  readonly mirror: IdentityMirror;
  readonly hello: HelloIdentity;
  readonly nearCache: NearCache;
  readonly context: BackendContext;
  /** The upstream's version and server name ("valkey", or "redis" in front of Redis), as its discovery read them. */
  serverVersion = '8.0.0';
  serverName = 'valkey';
  /** The standalone upstream's `databases` (SELECT's bound), learned on the first SELECT n ≠ 0. */
  private databases: number | null = null;
  private databasesLookup: Promise<number> | null = null;

  constructor(readonly config: RespoolConfig, private readonly deps: BackendDeps) {
    const { metrics, events, log, users } = deps;
    const pools = (this.pools = new UpstreamPools(config, metrics, events));
    const refresher = (this.refresher = new TopologyRefresher({
      events,
      seeds: config.upstreams,
      mode: config.mode,
      pools,
      minIntervalMs: config.cluster.refreshMinIntervalMs,
      periodMs: config.cluster.refreshPeriodMs,
      log,
      metrics,
    }));
    const router = (this.router = new Router(refresher, pools, config.cluster, log, metrics, deps.reads));
    // Hot keys (src/hotkeys): detection + split copies; hooks itself into the router when active.
    this.hotKeys = new HotKeys({ config: config.hotKeys, router, refresher, pools, log, metrics, fleet: deps.fleet?.(refresher, pools) ?? null });
    // Leased connections: a client gone while blocked is unblocked from a shared link by its id.
    this.dedicated = new LeasePools(config, async (host, port, id) => {
      await pools.get(host, port, 2, 'primary').call(['CLIENT', 'UNBLOCK', id]);
    }, { metrics });
    // Blocked pops parked at respool: one watch connection per node, as respool's own user.
    this.parking = new ParkedPops(router, (host, port) => ({
      host,
      port,
      auth: config.upstreamAuth,
      tls: config.upstreamTls ?? null,
      connectTimeoutMs: config.timeouts.connectMs,
      maxBulkLength: config.limits.maxBulkLength,
    }), log, metrics);
    this.pubsub = new PubSubHub({ refresher, redirects: router.redirects, config, log, metrics });
    // Users with an upstream identity: mirrored ones kept on every node; their errors as they know their name.
    const mirror = (this.mirror = new IdentityMirror({ users, pools, closeIdentity: (identity) => pools.closeIdentity(identity), events, log }));
    pools.identityHooks = mirror;
    this.dedicated.identityHooks = mirror;
    router.identityErrors = (call, identity, frame) => {
      if (isNodeDenial(frame)) mirror.importDenials(call.node, call.client instanceof ClientSession ? clientInfoLine(call.client) : '');
      return asSeenByClient(frame, identity);
    };
    // The near cache: its own tracking connections, leased as respool's identity (nearcache/near-cache.ts).
    // confirm auto: when another process could write through respool (workers, a takeover's two, a fleet's members).
    const { confirm } = config.nearCache;
    const manyProcesses = config.workers !== 1 || config.supervised || config.cluster.peers.length > 0 || config.cluster.peersFrom !== null;
    this.nearCache = new NearCache(config.nearCache, {
      dedicated: this.dedicated,
      topology: () => refresher.current,
      commandMs: () => config.timeouts.commandMs,
      log,
      confirm: confirm === 'always' || (confirm === 'auto' && manyProcesses),
    });
    // nearCache.hot: each detection window's top keys are cached until a window no longer ranks them.
    // The report names keys as text (detector.ts displayKey): back to their bytes; escaped ones (not UTF-8) are left out.
    if (config.nearCache.hot) this.hotKeys.onWindow = (report) => this.nearCache.setHot(report.topKeys.filter((k) => !k.key.includes('\\x')).map((k) => Buffer.from(k.key, 'utf8').toString('latin1')));
    // HELLO's server and version, as the first primary's own HELLO names them (client/hello-identity.ts).
    this.hello = new HelloIdentity(() => this.askFirstPrimary(['HELLO']), { server: this.serverName, version: this.serverVersion });
    this.context = {
      router,
      hotKeys: this.hotKeys,
      dedicated: this.dedicated,
      parking: this.parking,
      pubsub: this.pubsub,
      hello: this.hello,
      scripts: new ScriptCache(),
      functions: new FunctionFlags(() => this.askFirstPrimary(['FUNCTION', 'LIST'])),
      runningScripts: new RunningScripts(),
      trackedKeys: new TrackedKeys(),
      nearCache: this.nearCache,
      unblockLease: async (host, port, id, how) => {
        const reply = await pools.get(host, port, 2, 'primary').call(['CLIENT', 'UNBLOCK', id, how.toUpperCase()]);
        return reply.toString('latin1') === ':1\r\n';
      },
      isCluster: () => refresher.current?.mode === 'cluster',
      databases: () => {
        if (this.databases !== null) return Promise.resolve(this.databases);
        return (this.databasesLookup ??= this.learnDatabases().finally(() => {
          this.databasesLookup = null;
        }));
      },
      serverVersion: () => this.serverVersion,
      serverName: () => this.serverName,
    };
    // After each discovery: drop pools of nodes that left; take the upstream's version and name
    // (read by discovery's INFO). A MOVED patch removes no node and keeps the first shard, so it
    // needs none of this (and MOVED storms must stay cheap).
    refresher.onChange((topology: Topology, change) => {
      this.parking.onTopology(); // parked keys whose slot moved: registered at their new owner
      if (change === 'moved') return;
      this.nearCache.onTopology(topology); // entries of nodes that no longer own their slot
      void this.hello.learn(); // HELLO's server name and version, as the nodes give them
      mirror.onTopology(topology); // nodes new, restarted or behind get the mirrored users
      pools.retainOnly(new Set(topology.allNodes().map((n) => n.address)));
      const primary = topology.shards[0]?.primary;
      if (primary?.version) this.serverVersion = primary.version;
      if (primary?.serverName) this.serverName = primary.serverName;
    });
    this.hotKeys.start();
  }

  private mirrorAllowed: boolean | null = null;
  private mirrorCheck: Promise<void> | null = null;

  /**
   * acl.upstream 'auto': restricted users run as mirrored identities (upstream/identity-mirror.ts)
   * where respool's own identity may manage ACL users on the nodes — asked of the first primary
   * with ACL DRYRUN of ACL SETUSER (+OK: allowed; a reason, or an error: not) — and as respool
   * otherwise, with a warning saying what that costs. The server asks it of the main upstreams,
   * at start and at every discovery; the answer holds for every user (UserDirectory).
   */
  checkMirrorAllowed(): Promise<void> {
    const { config } = this;
    const { log, users } = this.deps;
    if (config.acl.upstream !== 'auto') return Promise.resolve();
    return (this.mirrorCheck ??= (async () => {
      const user = config.upstreamAuth?.username ?? 'default';
      let allowed = false;
      let why = '';
      try {
        const frame = await this.askFirstPrimary(['ACL', 'DRYRUN', user, 'ACL', 'SETUSER', `${config.acl.mirrorPrefix}probe`]);
        const verdict = mirrorVerdict(frame);
        // A node busy with a script (or loading) says nothing of what it allows: keep what was known.
        if (verdict === null && this.mirrorAllowed !== null) return;
        allowed = verdict === true;
        if (!allowed) why = String(decodeReply(frame) instanceof RespError ? (decodeReply(frame) as RespError).message : decodeReply(frame));
      } catch (err) {
        // No primary known yet, or the node is not reachable now: keep what was known.
        if (this.mirrorAllowed !== null || this.refresher.current?.shards[0]?.primary === undefined) return;
        why = (err as Error).message;
      }
      if (allowed !== this.mirrorAllowed) {
        if (allowed) log.info({ event: 'acl_mirror', upstreamUser: user }, `acl.upstream auto: restricted users run as users respool keeps on the nodes (${config.acl.mirrorPrefix}<name>)`);
        else log.warn({ event: 'acl_mirror', upstreamUser: user, reason: why }, `acl.upstream auto: respool's upstream user ${user} may not manage ACL users on the nodes (${why}); restricted users run as respool, and their scripts, functions and SORT patterns are refused`);
      }
      this.mirrorAllowed = allowed;
      users.setNodesAllowMirror(allowed);
    })().finally(() => {
      this.mirrorCheck = null;
    }));
  }

  /** A command on the first primary's shared link (RESP2); rejects while no primary is known. */
  askFirstPrimary(args: Array<string | Buffer>): Promise<Buffer> {
    const primary = this.refresher.current?.shards[0]?.primary;
    return primary === undefined ? Promise.reject(new Error('no primary known')) : this.pools.get(primary.host, primary.port, 2, 'primary').call(args);
  }

  private async learnDatabases(): Promise<number> {
    const { log } = this.deps;
    let frame: Buffer;
    try {
      frame = await this.askFirstPrimary(['CONFIG', 'GET', 'databases']);
    } catch (err) {
      log.warn({ err: (err as Error).message }, `CONFIG GET databases failed; assuming ${DEFAULT_DATABASES} for now`);
      return DEFAULT_DATABASES; // the node could not be asked: ask again next time
    }
    const reply = decodeReply(frame);
    const value = Array.isArray(reply) && reply.length === 2 ? Number(String(reply[1])) : NaN;
    if (Number.isSafeInteger(value) && value > 0) this.databases = value;
    else {
      // Refused (CONFIG renamed or not permitted) or not a number: Valkey's default, for good.
      log.warn({ reply: reply instanceof RespError ? reply.message : String(reply) }, `CONFIG GET databases gave no count; assuming ${DEFAULT_DATABASES}`);
      this.databases = DEFAULT_DATABASES;
    }
    return this.databases;
  }

  /** Ends everything it holds (after its clients are gone). */
  async close(): Promise<void> {
    this.hotKeys.stop();
    this.nearCache.close();
    this.pubsub.close();
    this.parking.close();
    await this.dedicated.closeAll();
    this.refresher.stop();
    this.pools.closeAll();
  }
}

/**
 * The backends of tenants with upstreams of their own (tenants[].upstreams) and their clients'
 * contexts: the main context with the tenant's backend in place of the main one, and the main
 * config with the tenant's upstreams, mode, upstreamAuth and upstreamTls (both read through to the
 * main ones for everything else, so a reload reaches them too).
 */
export function tenantBackends(main: ServerContext, tenants: readonly Tenant[], deps: BackendDeps): Map<Tenant, { backend: Backend; context: ServerContext }> {
  const out = new Map<Tenant, { backend: Backend; context: ServerContext }>();
  for (const tenant of tenants) {
    const own = main.config.tenants.find((t) => t.name === tenant.name)?.upstream ?? null;
    if (own === null) continue;
    const config = Object.assign(Object.create(main.config) as RespoolConfig, own);
    const backend = new Backend(config, deps);
    const context = Object.assign(Object.create(main) as ServerContext, backend.context, { config, migration: undefined }); // a migration moves the main upstreams only
    out.set(tenant, { backend, context });
  }
  return out;
}
