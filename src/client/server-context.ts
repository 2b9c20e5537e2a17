import type { MigrationHandle } from '../migration/migration-process.js';
import type { Logger } from 'pino';
import type { RespoolConfig } from '../config/types.js';
import type { CommandTable } from '../commands/command-table.js';
import type { Router } from '../routing/router.js';
import type { Metrics } from '../metrics/metrics.js';
import type { HandlerSession } from './handler-session.js';
import type { HotKeys } from '../hotkeys/hot-keys.js';
import type { LeasePools } from '../upstream/lease-pools.js';
import type { ParkedPops } from '../parking/parked-pops.js';
import type { PubSubHub } from '../pubsub/hub.js';
import type { ClusterEmulation } from '../fleet/cluster-emulation.js';
import type { ScriptCache } from '../scripts/script-cache.js';
import type { RunningScripts } from '../scripts/running-scripts.js';
import type { ClientPause } from './client-pause.js';
import type { UserDirectory } from '../acl/user-directory.js';
import type { FleetView } from '../fleet/fleet-view.js';
import type { MonitorFeed } from './monitor-feed.js';
import type { RequestObserver } from '../observe/request-observer.js';
import type { ScriptCommands } from './script-commands.js';
import type { NodeSaturation } from '../observe/node-saturation.js';
import type { BigKeys } from '../observe/big-keys.js';
import type { FairAdmission } from './fair-admission.js';
import type { HelloIdentity } from './hello-identity.js';
import type { FunctionFlags } from '../scripts/function-flags.js';
import type { TrackedKeys } from './tracked-keys.js';
import type { NearCache } from '../nearcache/near-cache.js';
import type { MemoryCeiling } from './memory-ceiling.js';
import type { TenantDirectory } from '../tenants/tenant-directory.js';
import type { Tenant } from '../tenants/tenant.js';

/**
 * What a client session needs from the running proxy, as five roles — each a question a handler
 * asks, so a function that needs one asks for that role alone (and a test fakes only it):
 *
 *   ProxySettings      the configuration, the command table, the cluster respool shows its clients
 *   UpstreamSide       the nodes behind this session's upstreams: routing, leases, subscriptions,
 *                      scripts, what the nodes are (one per backend, backend.ts)
 *   ClientDirectory    respool's clients as a whole: who is connected, admission, pause, MONITOR
 *   AccessControl      users, tenants and their limits, ACL changes shared with the fleet
 *   ProxyObservability logs, metrics, the slow log's observer, INFO's facts, the fleet's view
 */
export interface ServerContext extends ProxySettings, UpstreamSide, ClientDirectory, AccessControl, ProxyObservability {}

/** The configuration and what respool presents of itself as a server. */
export interface ProxySettings {
  readonly config: RespoolConfig;
  /** The current command table (built-in until the upstream's COMMAND reply replaces it). */
  commands(): CommandTable;
  /** The cluster respool shows its clients (CLUSTER SLOTS/SHARDS/NODES …: handlers/cluster.ts). */
  clusterView(): ClusterEmulation;
}

/** One set of upstreams as a session reaches them (backend.ts builds one per backend). */
export interface UpstreamSide {
  readonly router: Router;
  /** Hot keys: the RESPOOL command steers them. */
  readonly hotKeys: HotKeys;
  /** Leased upstream connections (WATCH, blocking commands). */
  readonly dedicated: LeasePools;
  /** Clients blocked in list and sorted-set pops, parked at respool (src/parking). */
  readonly parking: ParkedPops;
  /** Multiplexed subscriptions. */
  readonly pubsub: PubSubHub;
  /** Script bodies seen (EVAL, SCRIPT LOAD), to reload a script on a node that answers NOSCRIPT. */
  readonly scripts: ScriptCache;
  /** The nodes' functions' flags (FUNCTION LIST): whether CLIENT PAUSE WRITE holds an FCALL (scripts/function-flags.ts); absent in stand-in contexts. */
  readonly functions?: FunctionFlags;
  /** respool's tracking table: keys CLIENT TRACKING clients read, bounded by tracking-table-max-keys (tracked-keys.ts); absent in stand-in contexts. */
  readonly trackedKeys?: TrackedKeys;
  /** Values of the keys nearCache.keys names, kept exact by the nodes' invalidations (nearcache/near-cache.ts); absent in stand-in contexts. */
  readonly nearCache?: NearCache;
  /** A live migration of the main upstreams (src/migration): the main context's only (a tenant's own upstreams have none). */
  readonly migration?: MigrationHandle;
  /** Scripts in flight: PING reflects a node busy running one (scripts/running-scripts.ts). */
  readonly runningScripts: RunningScripts;
  /** CLIENT UNBLOCK of a leased connection, sent on a shared link to its node; true if it was blocked. */
  unblockLease(host: string, port: number, clientId: number, how: 'timeout' | 'error'): Promise<boolean>;
  /** True when the upstream is a cluster (decides SELECT and fan-out answers). */
  isCluster(): boolean;
  /**
   * How many databases the standalone upstream has (its `databases` setting, read once with
   * CONFIG GET; 16 when that is refused). Never rejects: 16 when the upstream cannot be asked
   * now (asked again next time).
   */
  databases(): Promise<number>;
  /** What HELLO names as the server, as the nodes' own HELLO does (client/hello-identity.ts); absent in stand-in contexts. */
  readonly hello?: HelloIdentity;
  /** The upstream's version, reported in HELLO. */
  serverVersion(): string;
  /** The upstream's server name ("valkey", or "redis" in front of Redis), reported in HELLO and INFO server. */
  serverName(): string;
}

/** respool's clients as a whole. */
export interface ClientDirectory {
  /** Fair admission: clients with requests left after their slice take turns (client/fair-admission.ts). */
  readonly admission: FairAdmission;
  /** limits.maxMemory: told when a client's output grows past HOLDER_BYTES (client/memory-ceiling.ts). */
  readonly memory?: MemoryCeiling;
  /** CLIENT PAUSE over respool's own clients: dispatch checks `active` before each request. */
  readonly clientPause: ClientPause;
  /** MONITOR's clients: dispatch feeds them each request while `active` (monitor-feed.ts, handlers/monitor.ts). */
  readonly monitors: MonitorFeed;
  /** The commands scripts run on the nodes, for the slow log while it logs every command (script-commands.ts); absent in stand-in contexts. */
  readonly scriptCommands?: ScriptCommands;
  /**
   * With workers or in a fleet: the other workers' and members' tracking clients of a namespace are
   * told of its flush before its keys go and after (handlers/namespace-scope.ts,
   * workers/peer-broadcast.ts, fleet/fleet-broadcast.ts); absent in a lone process.
   */
  readonly namespaceFlushPeers?: { begin(id: string, pattern: Buffer): Promise<void>; end(id: string): Promise<void> };
  /** Every open client session (INFO clients counts them). */
  sessions(): Iterable<HandlerSession>;
  /** The open session with this CLIENT ID (CLIENT TRACKING … REDIRECT). */
  sessionById(id: number): HandlerSession | undefined;
  nextClientId(): number;
  onSessionClosed(session: HandlerSession): void;
}

/** Who may do what: users, tenants, and the fleet's share of their changes. */
export interface AccessControl {
  /** respool's users (config, ACL file, ACL SETUSER), their identities on the nodes, ACL LOG. */
  readonly users: UserDirectory;
  /** Applications sharing this respool (config tenants[]): each user's tenant, its limits and counts (src/tenants). */
  readonly tenants: TenantDirectory;
  /** The context of a tenant's clients: this one with the tenant's own upstreams (tenants[].upstreams, backend.ts), or the main one. */
  contextOf?(tenant: Tenant | null): ServerContext;
  /**
   * Changes a tenant's limits at run time (RESPOOL TENANT SET, POST /tenants; tenants/limit-changes.ts):
   * here, and in a fleet with shared state on every member. The error text, or null once applied.
   */
  changeTenantLimits?(name: string, changes: ReadonlyArray<readonly [string, unknown]>): Promise<string | null>;
  /** In a fleet with shared state: shares a client's ACL change with every member (fleet/fleet-acl.ts). */
  readonly fleetAcl?: { share(args: readonly Buffer[]): Promise<void> } | null;
}

/** What respool tells about itself: logs, metrics, the slow log, INFO's facts. */
export interface ProxyObservability {
  readonly log: Logger;
  readonly metrics?: Metrics;
  /** Slow log, command log and per-command latency, told of every reply written (observe/request-observer.ts). */
  readonly observer?: RequestObserver;
  /** Which nodes are saturated (observe/node-saturation.ts). */
  readonly saturation?: NodeSaturation;
  /** The largest keys by reply size in the hot-key sampler's sample; null when bigKeys.enabled is off. */
  readonly bigKeys?: BigKeys | null;
  /** The fleet's members and shared state as this instance sees them (RESPOOL FLEET); absent in stand-in contexts. */
  fleetView?(): FleetView;
  /** What respool's own INFO reports about the running proxy (handlers/info.ts); absent in stand-in contexts. */
  readonly facts?: ProxyFacts;
}

/** The running proxy as INFO server / INFO respool describe it. */
export interface ProxyFacts {
  /** When the proxy started (ms since the epoch). */
  readonly startedAt: number;
  /** The config file given on the command line (absolute), or null. */
  readonly configFile: string | null;
  /** Topologies discovered so far (MOVED patches not counted). */
  topologyEpoch(): number;
  /** Open shared links per node address. */
  linksByNode(): Record<string, number>;
  /** A node's circuit: closed, half-open or open. */
  circuitState(address: string): string;
  /** respool's own availability zone, if known. */
  zone(): string | null;
}
