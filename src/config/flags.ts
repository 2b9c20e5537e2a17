// The command-line flags, as data: load-config.ts builds the parseArgs options from this table
// and help-text.ts prints it. A flag with `field` sets that numeric setting (see NUMERIC_FIELDS).

import { DEFAULT_CONFIG } from './defaults.js';
import { numericField, type NumericField } from './schema.js';
import { CROSS_SLOT_TRANSACTIONS, LOG_LEVELS, MODES, READ_STRATEGIES, ZONE_FROM } from './types.js';
import { formatDuration, formatHostPort, formatSize } from './values.js';
import { TLS_FLAGS } from './tls-config.js';

export interface FlagSpec {
  name: string; // without the leading --
  short?: string;
  type: 'string' | 'boolean';
  multiple?: boolean;
  value?: string; // the value's placeholder in --help
  help: string;
  default?: string; // shown in --help
  field?: NumericField;
}

/**
 * A flag taking one string value: `value` is its placeholder in --help, `def` the default shown
 * there (undefined: none shown); help comes last, as in numeric().
 */
function stringFlag(name: string, value: string, def: string | undefined, help: string): FlagSpec {
  return def === undefined ? { name, type: 'string', value, help } : { name, type: 'string', value, help, default: def };
}

function numeric(name: string, path: string, help: string): FlagSpec {
  const field = numericField(path);
  const [group, key] = path.split('.') as [string, string | undefined];
  const defaults = DEFAULT_CONFIG as unknown as Record<string, Record<string, number>>;
  const def = key === undefined ? (DEFAULT_CONFIG as unknown as Record<string, number>)[group]! : defaults[group]![key]!;
  const shown = field.kind === 'size' ? formatSize(def) : field.kind === 'duration' ? formatDuration(def) : String(def);
  const value = field.kind === 'size' ? 'SIZE' : field.kind === 'duration' ? 'DURATION' : 'N';
  const range = field.kind === 'integer' ? ` (${field.min}..${field.max})` : '';
  return { ...stringFlag(name, value, shown, help + range), field };
}

export const FLAGS: readonly FlagSpec[] = [
  stringFlag('listen', 'host:port|unix:PATH', formatHostPort(DEFAULT_CONFIG.listen!),
    'address clients connect to; port 0 picks a free port; unix:PATH listens on a Unix domain socket instead of TCP '
      + '(unixSocket: in the file adds one beside TCP)'),
  {
    name: 'upstream', type: 'string', multiple: true, value: 'host:port[,host:port...]',
    help: 'upstream Valkey node(s), cluster seed nodes in cluster mode; repeatable; required',
  },
  stringFlag('workers', 'N|auto', String(DEFAULT_CONFIG.workers),
    'client-serving processes sharing the listen sockets (node cluster module); auto = one per core; each keeps its own upstream links'),
  { name: 'supervised', type: 'boolean',
    help: 'run the supervisor even with one worker, so SIGUSR2 replaces it by the code on disk without dropping a client (a takeover); always so with --workers > 1' },
  stringFlag('mode', MODES.join('|'), DEFAULT_CONFIG.mode, 'auto detects cluster or standalone from the upstream'),
  stringFlag('admin', 'host:port|port|off', 'off',
    'HTTP admin server (metrics, health, topology); a bare port listens on 127.0.0.1; port 0 picks a free port'),
  stringFlag('admin-token-file', 'FILE', 'none',
    'file whose first line is the bearer token admin mutations (POST/DELETE) need '
      + '(else RESPOOL_ADMIN_TOKEN, else admin.token in the file); without a token they are refused'),
  { name: 'config', short: 'c', type: 'string', value: 'file.yaml', help: 'read settings from a YAML file' },
  numeric('connections-per-node', 'connectionsPerNode', 'pipelined links to each upstream node'),
  stringFlag('upstream-user', 'NAME', 'none (the default user)', 'user name for AUTH to the upstream nodes'),
  stringFlag('upstream-password', 'PASSWORD', 'none (no AUTH)',
    'password for AUTH to the upstream nodes; prefer the environment variable '
      + 'RESPOOL_UPSTREAM_PASSWORD (command lines are visible to other users)'),
  stringFlag('unix-socket-mode', 'OCTAL', DEFAULT_CONFIG.unixSocketMode.toString(8), "permission bits of the Unix socket (--listen unix:PATH)"),
  stringFlag('acl-file', 'FILE', 'none', "respool's users file in Valkey's aclfile format: read at start and on SIGHUP, ACL LOAD / ACL SAVE use it"),
  stringFlag('acl-upstream', 'auto|mirror|none', DEFAULT_CONFIG.acl.upstream,
    'who restricted users run as on the nodes: mirror (a user with the same rules that respool keeps on every node), '
      + 'none (respool\'s own user; their scripts and SORT patterns are refused), or auto: mirror where respool\'s identity '
      + 'may manage ACL users on the nodes, else none'),
  numeric('max-bulk-length', 'limits.maxBulkLength', 'largest bulk string accepted from a client'),
  numeric('max-pending-per-client', 'limits.maxPendingPerClient', 'requests in flight per client'),
  numeric('max-query-bytes-per-client', 'limits.maxQueryBytesPerClient', 'unparsed request bytes buffered per client'),
  stringFlag('max-memory', 'auto|SIZE', String(DEFAULT_CONFIG.limits.maxMemory),
    'ceiling on what respool buffers (clients\' unread replies and queued requests, link buffers); past it the clients '
      + 'holding the most output are disconnected; auto = 75% of the cgroup memory limit less respool\'s own footprint, 0 = off'),
  numeric('max-inflight-per-client', 'admission.maxInflightPerClient', 'requests one client may have owed at once on the shared links'),
  numeric('bulk-connections-per-node', 'admission.bulkConnectionsPerNode', 'links per node for bulk clients (deep pipelines, big replies, slow readers); 0 = none'),
  numeric('connect-timeout', 'timeouts.connectMs', 'time to connect to an upstream node'),
  numeric('command-timeout', 'timeouts.commandMs', 'time to wait for an upstream reply'),
  numeric('max-redirects', 'cluster.maxRedirects', 'MOVED/ASK redirects followed per request'),
  numeric('refresh-period', 'cluster.refreshPeriodMs', 'cluster topology refresh period'),
  stringFlag('cluster-announce', 'host:port', 'the listen address',
    'the address respool gives cluster clients in CLUSTER SLOTS/SHARDS/NODES '
      + '(from the listen address: 127.0.0.1 when listening on 0.0.0.0 or ::)'),
  {
    name: 'cluster-peer', type: 'string', multiple: true, value: 'host:port[,host:port...]',
    help: 'another respool instance of this fleet (its --cluster-announce): cluster clients get the slots '
      + 'divided among all instances; repeatable; this instance\'s own address is ignored',
    default: 'none',
  },
  stringFlag('cluster-peers-from', 'dns:NAME:PORT|off', 'off',
    'more fleet members from DNS: every address NAME resolves to (a headless Service), at PORT; '
      + 'resolved again every cluster.peersResolveMs'),
  numeric('peer-check-interval', 'cluster.peerCheckMs', 'how often each fleet member is asked (CLUSTER MYID), with ±50% jitter'),
  numeric('peer-down-after', 'cluster.peerDownAfterMs', 'a fleet member silent this long is marked fail and its slots move'),
  stringFlag('fleet-state', 'auto|upstream|off', 'auto',
    'fleet-wide runtime state (split rules, copy fills, hot-key reports) in the upstream cluster; auto = when the fleet has peers'),
  numeric('max-clients', 'clients.maxClients', 'client connections; the excess client gets an error reply'),
  numeric('accept-rate', 'clients.acceptRatePerSecond', 'new client connections admitted per second (0 = unlimited); established clients are served first'),
  numeric('idle-timeout', 'clients.idleTimeoutMs', 'close a client idle this long (0 = never)'),
  numeric('max-output-bytes-per-client', 'clients.maxOutputBytesPerClient', 'unread reply bytes before a client is disconnected'),
  numeric('tcp-keepalive', 'clients.tcpKeepAliveMs', 'TCP keepalive interval for client connections (0 = off)'),
  numeric('dial-attempts-per-window', 'resilience.dialAttemptsPerWindow', 'connection attempts to a failing node per window, all links together'),
  numeric('dial-window', 'resilience.dialWindowMs', 'the window of --dial-attempts-per-window (like cluster-node-timeout)'),
  numeric('dedicated-max-per-node', 'dedicated.maxPerNode', 'leased upstream connections (WATCH, blocking commands) per node'),
  numeric('dedicated-max-total', 'dedicated.maxTotal', 'leased upstream connections for the whole process'),
  numeric('dedicated-acquire-timeout', 'dedicated.acquireTimeoutMs', 'wait for a leased connection at the bound before refusing'),
  numeric('dedicated-max-replica-streams', 'dedicated.maxReplicaStreams', 'clients attached to the replication stream (SYNC, PSYNC) at once; 0 refuses SYNC'),
  numeric('pubsub-max-output-bytes-per-client', 'pubsub.maxOutputBytesPerClient', 'unread pub/sub bytes before a subscriber is disconnected'),
  numeric('slowlog-threshold-us', 'slowlog.thresholdUs', 'respool\'s slow log: requests at least this slow (receive → reply written) are logged; -1 off'),
  numeric('slowlog-max-len', 'slowlog.maxLen', 'entries respool\'s slow log keeps'),
  numeric('queue-window', 'resilience.queueWindowMs', 'how long a request waits for a link to a node that has none before failing'),
  stringFlag('read-strategy', 'STRATEGY', DEFAULT_CONFIG.reads.strategy,
    `where read-only commands go: ${READ_STRATEGIES.join(', ')} (replicas in respool's zone first)`),
  stringFlag('zone', 'NAME', 'none', 'respool\'s own availability zone (else the environment variable RESPOOL_ZONE, else --zone-from)'),
  stringFlag('zone-from', ZONE_FROM.join('|'), DEFAULT_CONFIG.reads.zoneFrom,
    'discover the zone at start from this cloud\'s instance metadata service at --metadata-base-url (opt-in)'),
  stringFlag('transactions-cross-slot', CROSS_SLOT_TRANSACTIONS.join('|'), DEFAULT_CONFIG.transactions.crossSlot,
    'MULTI … EXEC over keys in several slots: split into one block per slot (atomic per slot), or refuse with CROSSSLOT as a cluster node does'),
  stringFlag('metadata-base-url', 'URL', undefined, 'base URL of the instance metadata service for --zone-from (required with it)'),
  stringFlag('hot-keys-detection', 'on|off', 'on', 'count sampled keys and report the hot ones (admin /hotkeys, RESPOOL HOTKEYS, metrics)'),
  stringFlag('hot-keys-sample-rate', 'RATE', String(DEFAULT_CONFIG.hotKeys.detection.sampleRate),
    'share of keyed requests sampled by hot-key detection, above 0 and at most 1'),
  stringFlag('hot-keys-window', 'DURATION', formatDuration(DEFAULT_CONFIG.hotKeys.detection.windowMs),
    'hot-key detection window: rates and shares are reported per window'),
  {
    name: 'split-key', type: 'string', multiple: true, value: 'KEY[=COPIES]',
    help: 'keep KEY in COPIES copies on distinct primaries (default one per primary): reads go to one copy, writes to all; repeatable',
  },
  ...TLS_FLAGS,
  stringFlag('log-level', LOG_LEVELS.join('|'), DEFAULT_CONFIG.logLevel, 'log verbosity'),
  { name: 'help', short: 'h', type: 'boolean', help: 'print this help and exit' },
  { name: 'version', short: 'v', type: 'boolean', help: 'print the version and exit' },
];

export const UPSTREAM_PASSWORD_ENV = 'RESPOOL_UPSTREAM_PASSWORD';
export const ADMIN_TOKEN_ENV = 'RESPOOL_ADMIN_TOKEN';
