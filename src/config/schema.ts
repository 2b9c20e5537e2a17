// The YAML file form of RespoolConfig, as a JSON Schema checked by ajv. Same camelCase names as
// RespoolConfig; addresses are "host:port" strings; sizes and durations may carry units; a
// password may be read from the environment (passwordEnv). Every object sets
// additionalProperties: false so a misspelt key is an error, not a silently ignored setting.
//
// The schema checks shape (keys, types, enums, the written form of sizes and durations). What a
// pattern cannot express — a port's range, "64kb" being at least the minimum, reading
// passwordEnv — is checked when file-config.ts converts the values (setting-converters.ts, values.ts).
//
// "x-expect" is our own annotation keyword: the phrase an error about that value starts with
// ("must be a size like 512mb"). schema-validator.ts registers it with ajv; file-config.ts words the errors with it.

import { DURATION_PATTERN, ENV_NAME_PATTERN, GiB, SIZE_PATTERN, TiB, type Range } from './values.js';
import { ACL_UPSTREAM_MODES, CROSS_SLOT_TRANSACTIONS, NEAR_CACHE_CONFIRM, FLEET_STATE_MODES, LOG_LEVELS, MODES, READ_STRATEGIES, SCRIPT_COMMAND_COUNTS, ZONE_FROM } from './types.js';
import { HOT_KEYS_SCHEMA } from './hot-keys-config.js';
import { LISTEN_TLS_SCHEMA, TLS_SCHEMA, UPSTREAM_TLS_SCHEMA } from './tls-config.js';
import { OBSERVABILITY_SWITCHES } from './observability-config.js';

/** Every numeric setting: where it lives, how it is written, and its allowed range. */
export interface NumericField extends Range {
  path: string; // "connectionsPerNode" or "group.key"
  kind: 'integer' | 'size' | 'duration';
}

const DAY_MS = 24 * 3_600_000;

export const NUMERIC_FIELDS: readonly NumericField[] = [
  { path: 'connectionsPerNode', kind: 'integer', min: 1, max: 64 },
  // A whole bulk string sits in one Node Buffer together with its framing: stay well below 4 GiB.
  { path: 'limits.maxBulkLength', kind: 'size', min: 1, max: 2 * GiB },
  { path: 'limits.maxArrayLength', kind: 'integer', min: 1, max: 2_147_483_647 },
  { path: 'limits.maxInlineLength', kind: 'size', min: 1, max: 2 * GiB },
  { path: 'limits.maxNestingDepth', kind: 'integer', min: 1, max: 1000 },
  { path: 'limits.maxPendingPerClient', kind: 'integer', min: 1, max: 10_000_000 },
  { path: 'limits.maxQueryBytesPerClient', kind: 'size', min: 1, max: 1 * TiB },
  { path: 'limits.maxCrossSlotCopyBytes', kind: 'size', min: 0, max: 2 * GiB },
  // Durations stay below setTimeout's limit (2^31-1 ms, ~24.8 days).
  { path: 'nearCache.maxBytes', kind: 'size', min: 1024, max: 1 * TiB },
  { path: 'nearCache.maxEntryBytes', kind: 'size', min: 128, max: 2 * GiB },
  { path: 'nearCache.maxAgeMs', kind: 'duration', min: 0, max: DAY_MS },
  { path: 'migration.maxKeysPerSecond', kind: 'integer', min: 1, max: 100_000_000 },
  { path: 'migration.maxBytesPerSecond', kind: 'size', min: 1024, max: 1 * TiB },
  { path: 'migration.maxP99RisePercent', kind: 'integer', min: 1, max: 100_000 },
  { path: 'migration.maxPayloadBytes', kind: 'size', min: 1024, max: 2 * GiB },
  { path: 'migration.batchKeys', kind: 'integer', min: 1, max: 100_000 },
  { path: 'migration.copiesInFlight', kind: 'integer', min: 1, max: 10_000 },
  { path: 'migration.verifySample', kind: 'integer', min: 0, max: 10_000_000 },
  { path: 'migration.cutoverMaxPauseMs', kind: 'duration', min: 1, max: 3_600_000 },
  { path: 'migration.rollbackWindowMs', kind: 'duration', min: 0, max: DAY_MS },
  { path: 'timeouts.connectMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'timeouts.commandMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'timeouts.adminCommandMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'cluster.maxRedirects', kind: 'integer', min: 0, max: 100 },
  { path: 'cluster.refreshMinIntervalMs', kind: 'duration', min: 0, max: DAY_MS },
  { path: 'cluster.refreshPeriodMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'cluster.retryBudget', kind: 'integer', min: 0, max: 100 },
  { path: 'cluster.retryBaseMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'cluster.retryMaxMs', kind: 'duration', min: 1, max: DAY_MS },
  // fleet membership and shared state (src/fleet)
  { path: 'cluster.peersResolveMs', kind: 'duration', min: 100, max: DAY_MS },
  { path: 'cluster.peerCheckMs', kind: 'duration', min: 10, max: 60_000 },
  { path: 'cluster.peerCheckTimeoutMs', kind: 'duration', min: 10, max: 60_000 },
  { path: 'cluster.peerDownAfterMs', kind: 'duration', min: 10, max: 3_600_000 },
  { path: 'cluster.peerRejoinAfterMs', kind: 'duration', min: 0, max: 3_600_000 },
  { path: 'cluster.fleetLeaseMs', kind: 'duration', min: 100, max: 3_600_000 },
  // resilience: backoff, budgets, circuits, queue bounds (src/upstream/*)
  { path: 'resilience.backoffBaseMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'resilience.backoffCapMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'resilience.dialAttemptsPerWindow', kind: 'integer', min: 1, max: 1_000_000 },
  { path: 'resilience.dialWindowMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'resilience.retryBudgetPercent', kind: 'integer', min: 0, max: 1000 },
  { path: 'resilience.retryBudgetMinPerSecond', kind: 'integer', min: 0, max: 1_000_000 },
  { path: 'resilience.circuitFailureThreshold', kind: 'integer', min: 1, max: 1000 },
  { path: 'resilience.queueWindowMs', kind: 'duration', min: 0, max: DAY_MS },
  { path: 'resilience.maxQueuedPerNode', kind: 'integer', min: 0, max: 100_000_000 },
  { path: 'resilience.maxQueuedBytesPerNode', kind: 'size', min: 0, max: 1 * TiB },
  { path: 'resilience.maxInflightPerLink', kind: 'integer', min: 1, max: 100_000_000 },
  { path: 'resilience.maxInflightBytesPerLink', kind: 'size', min: 1, max: 1 * TiB },
  { path: 'resilience.maxInflightPerProcess', kind: 'integer', min: 1, max: 1_000_000_000 },
  { path: 'resilience.maxInflightBytesPerProcess', kind: 'size', min: 1, max: 1 * TiB },
  // clients: storms, idle and slow clients (src/server.ts, src/session/client-session.ts)
  { path: 'clients.maxClients', kind: 'integer', min: 1, max: 10_000_000 },
  { path: 'clients.acceptRatePerSecond', kind: 'integer', min: 0, max: 100_000_000 },
  { path: 'clients.idleTimeoutMs', kind: 'duration', min: 0, max: DAY_MS },
  { path: 'clients.maxOutputBytesPerClient', kind: 'size', min: 1, max: 1 * TiB },
  { path: 'clients.outputStallMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'clients.tcpKeepAliveMs', kind: 'duration', min: 0, max: DAY_MS },
  // reads: read strategies and zone discovery (src/routing/read-strategy.ts, src/cluster/zone-discovery.ts)
  // The metadata lookup delays start-up by at most this much: capped at 10 s.
  { path: 'reads.metadataTimeoutMs', kind: 'duration', min: 1, max: 10_000 },
  { path: 'reads.maxReplicaLagBytes', kind: 'size', min: 0, max: 1 * TiB },
  // dedicated: leased connections for WATCH and blocking commands (src/upstream/lease-pools.ts)
  { path: 'dedicated.maxPerNode', kind: 'integer', min: 1, max: 1_000_000 },
  { path: 'dedicated.maxTotal', kind: 'integer', min: 1, max: 10_000_000 },
  { path: 'dedicated.acquireTimeoutMs', kind: 'duration', min: 0, max: DAY_MS },
  { path: 'dedicated.idleMs', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'dedicated.blockMarginMs', kind: 'duration', min: 0, max: DAY_MS },
  { path: 'dedicated.maxReplicaStreams', kind: 'integer', min: 0, max: 10_000 },
  // acl: ACL LOG's length (Valkey's acllog-max-len)
  { path: 'acl.logMaxLen', kind: 'integer', min: 0, max: 1_000_000 },
  // admission: fair turns between clients, their lanes (src/client/fair-admission.ts, lane-class.ts)
  { path: 'admission.sliceRequests', kind: 'integer', min: 1, max: 1_000_000 },
  { path: 'admission.sliceBytes', kind: 'size', min: 1, max: 1 * GiB },
  { path: 'admission.maxInflightPerClient', kind: 'integer', min: 1, max: 10_000_000 },
  { path: 'admission.maxInflightReplyBytesPerClient', kind: 'size', min: 1, max: 1 * TiB },
  { path: 'admission.bulkConnectionsPerNode', kind: 'integer', min: 0, max: 64 },
  // pubsub: multiplexed subscriptions (src/pubsub)
  { path: 'pubsub.maxOutputBytesPerClient', kind: 'size', min: 1, max: 1 * TiB },
  // what operators look at (src/observe): -1 turns a log off, as in Valkey
  { path: 'slowlog.thresholdUs', kind: 'integer', min: -1, max: 2_147_483_647 },
  { path: 'slowlog.maxLen', kind: 'integer', min: 0, max: 1_000_000 },
  { path: 'commandlog.largeRequestBytes', kind: 'integer', min: -1, max: 2_147_483_647 },
  { path: 'commandlog.largeRequestMaxLen', kind: 'integer', min: 0, max: 1_000_000 },
  { path: 'commandlog.largeReplyBytes', kind: 'integer', min: -1, max: 2_147_483_647 },
  { path: 'commandlog.largeReplyMaxLen', kind: 'integer', min: 0, max: 1_000_000 },
  { path: 'saturation.p99Ms', kind: 'duration', min: 1, max: DAY_MS },
  { path: 'saturation.cpuPercent', kind: 'integer', min: 1, max: 100 },
  { path: 'saturation.cpuSampleMs', kind: 'duration', min: 0, max: DAY_MS },
  { path: 'bigKeys.topK', kind: 'integer', min: 1, max: 1000 },
];

export function numericField(path: string): NumericField {
  const f = NUMERIC_FIELDS.find((x) => x.path === path);
  if (!f) throw new Error(`no numeric field ${path}`);
  return f;
}

type Schema = Record<string, unknown>;

function numericSchema(f: NumericField): Schema {
  switch (f.kind) {
    case 'integer':
      return {
        type: 'integer', minimum: f.min, maximum: f.max,
        'x-expect': `must be an integer from ${f.min} to ${f.max}`,
      };
    case 'size':
      return {
        type: ['integer', 'string'], minimum: 0, pattern: SIZE_PATTERN.source,
        'x-expect': 'must be a size like 512mb',
      };
    case 'duration':
      return {
        type: ['integer', 'string'], minimum: 0, pattern: DURATION_PATTERN.source,
        'x-expect': 'must be a duration like 5s or 200ms',
      };
  }
}

/** { type: object, properties: the numeric fields under `group` }, strict. */
function numericGroup(group: string): Schema {
  const properties: Record<string, Schema> = {};
  for (const f of NUMERIC_FIELDS) {
    const [g, key] = f.path.split('.');
    if (key !== undefined && g === group) properties[key] = numericSchema(f);
  }
  return { type: 'object', additionalProperties: false, properties, 'x-expect': 'must be a mapping' };
}

/** A numeric group plus its boolean switches (observability-config.ts). */
/** Every true/false setting that sits in a numeric group: group → its names (file-config.ts reads them). */
export const BOOLEAN_SETTINGS: Readonly<Record<string, readonly string[]>> = { ...OBSERVABILITY_SWITCHES, dedicated: ['parkPops'], nearCache: ['hot', 'coalesceAll'], migration: ['paceByLatency'] };

function withSwitches(group: string): Schema {
  return withBooleans(group, BOOLEAN_SETTINGS[group] ?? []);
}

/** A group's numeric fields plus `names`, each true or false. */
function withBooleans(group: string, names: readonly string[]): Schema {
  const base = numericGroup(group);
  const properties: Record<string, Schema> = { ...(base.properties as Record<string, Schema>) };
  for (const name of names) properties[name] = { type: 'boolean', 'x-expect': 'must be true or false' };
  return { ...base, properties };
}

const readStrategy: Schema = { enum: [...READ_STRATEGIES], 'x-expect': `must be one of ${READ_STRATEGIES.join(', ')}` };

/** reads: the numeric fields plus strategy, zone, zoneFrom, metadataBaseUrl and per-prefix strategies. */
function readsSchema(): Schema {
  const group = numericGroup('reads');
  return {
    ...group,
    properties: {
      ...(group.properties as Record<string, Schema>),
      strategy: readStrategy,
      zone: { type: ['string', 'null'], pattern: '^\\S+$', 'x-expect': 'must be a zone name without spaces, or null' },
      zoneFrom: { enum: [...ZONE_FROM], 'x-expect': `must be one of ${ZONE_FROM.join(', ')}` },
      metadataBaseUrl: { type: ['string', 'null'], 'x-expect': 'must be an http:// or https:// URL, or null' },
      prefixes: {
        type: 'array',
        'x-expect': 'must be a list of { prefix, strategy } mappings',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['prefix', 'strategy'],
          'x-expect': 'must be a mapping with prefix and strategy',
          properties: {
            prefix: { type: 'string', minLength: 1, 'x-expect': 'must be a non-empty string' },
            strategy: readStrategy,
          },
        },
      },
    },
  };
}

/** limits: the numeric fields plus maxMemory ("auto" or a size). */
function limitsSchema(): Schema {
  const group = numericGroup('limits');
  return {
    ...group,
    properties: {
      ...(group.properties as Record<string, Schema>),
      maxMemory: { type: ['integer', 'string'], minimum: 0, pattern: `^auto$|${SIZE_PATTERN.source}`, 'x-expect': 'must be auto or a size like 512mb (0 = off)' },
    },
  };
}

// Loose on purpose: the exact host:port rules (brackets, port range) live in toHostPort().
const hostPort: Schema = { type: 'string', 'x-expect': 'expected host:port' };

/** cluster: the numeric fields plus announce and peers (cluster emulation, src/handlers/cluster.ts). */
function clusterSchema(): Schema {
  const group = numericGroup('cluster');
  return {
    ...group,
    properties: {
      ...(group.properties as Record<string, Schema>),
      announce: { type: ['string', 'null'], 'x-expect': 'expected host:port or null' },
      peers: { type: 'array', items: hostPort, 'x-expect': 'must be a list of host:port strings' },
      peersFrom: { type: ['string', 'null'], 'x-expect': 'must be dns:NAME:PORT or null' },
      fleetState: { enum: [...FLEET_STATE_MODES], 'x-expect': `must be one of ${FLEET_STATE_MODES.join(', ')}` },
    },
  };
}

/** A tenant's name: it labels metrics. */
const TENANT_NAME = '^[A-Za-z0-9_.-]+$';
const password: Schema = { type: 'string', minLength: 1, 'x-expect': 'must be a non-empty string' };
const passwordEnv: Schema = {
  type: 'string', pattern: ENV_NAME_PATTERN.source,
  'x-expect': 'must be the name of an environment variable',
};
const passwordFile: Schema = { type: 'string', minLength: 1, 'x-expect': 'must be a file name' };

/** upstreamAuth (and tenants[].upstreamAuth): how respool authenticates to the nodes; null = no AUTH. */
function upstreamAuthSchema(): Schema {
  return {
    type: ['object', 'null'],
    additionalProperties: false,
    'x-expect': 'must be a mapping with username and password (or passwordEnv)',
    properties: {
      username: { type: ['string', 'null'], minLength: 1, 'x-expect': 'must be a non-empty string or null' },
      password,
      passwordEnv,
    },
  };
}

/** users[].upstream: mirror, none, or a mapped ACL user on the nodes. */
const userUpstream: Schema = {
  type: ['string', 'object'],
  pattern: '^(mirror|none)$',
  additionalProperties: false,
  required: ['username'],
  'x-expect': 'must be mirror, none, or a mapping with username and password (or passwordEnv, passwordFile)',
  properties: {
    username: { type: 'string', pattern: '^\\S+$', 'x-expect': 'must be a user name without spaces' },
    password,
    passwordEnv,
    passwordFile,
  },
};

/** acl: the ACL file, upstream identities, ACL LOG. */
function aclSchema(): Schema {
  const group = numericGroup('acl');
  return {
    ...group,
    properties: {
      ...(group.properties as Record<string, Schema>),
      file: { type: ['string', 'null'], minLength: 1, 'x-expect': 'must be a file name or null' },
      upstream: { enum: [...ACL_UPSTREAM_MODES], 'x-expect': `must be one of ${ACL_UPSTREAM_MODES.join(', ')}` },
      mirrorPrefix: { type: 'string', pattern: '^\\S+$', 'x-expect': 'must be a prefix without spaces' },
      mirrorSecret: { type: 'string', minLength: 16, 'x-expect': 'must be a string of at least 16 characters' },
      mirrorSecretEnv: passwordEnv,
    },
  };
}

export const CONFIG_FILE_SCHEMA: Schema = {
  type: 'object',
  additionalProperties: false,
  'x-expect': 'must be a mapping of settings',
  properties: {
    listen: { type: 'string', 'x-expect': 'expected host:port or unix:PATH' },
    // a Unix domain socket beside listen (or instead of it: listen: "unix:PATH")
    unixSocket: { type: ['string', 'null'], minLength: 1, 'x-expect': 'must be a socket path, or null' },
    unixSocketMode: { type: 'string', pattern: '^0?[0-7]{3}$', 'x-expect': 'must be permission bits in octal, like "660"' },
    listenTls: LISTEN_TLS_SCHEMA,
    tls: TLS_SCHEMA,
    upstreamTls: UPSTREAM_TLS_SCHEMA,
    upstreams: {
      type: 'array', minItems: 1, items: hostPort,
      'x-expect': 'must be a list of host:port strings, at least one',
    },
    mode: { enum: [...MODES], 'x-expect': `must be one of ${MODES.join(', ')}` },
    // null or "off" turns the admin server off; a mapping adds the token for mutations.
    admin: {
      type: ['string', 'null', 'object'],
      additionalProperties: false,
      'x-expect': 'expected host:port, null, or a mapping with address, token, tokenFile, readToken, readTokenFile',
      properties: {
        address: { type: ['string', 'null'], 'x-expect': 'expected host:port or null' },
        token: { type: 'string', minLength: 16, 'x-expect': 'must be a string of at least 16 characters' },
        tokenFile: { type: 'string', minLength: 1, 'x-expect': 'must be a file name' },
        // GET endpoints but /metrics, /healthz, /readyz need it (or the token) when set
        readToken: { type: 'string', minLength: 16, 'x-expect': 'must be a string of at least 16 characters' },
        readTokenFile: { type: 'string', minLength: 1, 'x-expect': 'must be a file name' },
      },
    },
    connectionsPerNode: numericSchema(numericField('connectionsPerNode')),
    // processes sharing the listen sockets (node's cluster module); "auto" = one per core
    workers: { type: ['integer', 'string'], minimum: 1, maximum: 64, pattern: '^auto$', 'x-expect': 'must be a number of processes (1..64) or auto' },
    // the supervisor even with one worker, so SIGUSR2 can replace it (a takeover)
    supervised: { type: 'boolean', 'x-expect': 'must be true or false' },
    // How respool authenticates to the upstream nodes; null = no AUTH. Give password or passwordEnv.
    upstreamAuth: upstreamAuthSchema(),
    // respool's own users (AUTH name password); empty = clients need no AUTH. `rules`: Valkey ACL
    // rules ("on >secret ~app:* +@read"); without rules a password means `on >password +@all ~* &*`.
    users: {
      type: 'array',
      'x-expect': 'must be a list of { name, password } or { name, rules } mappings',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name'],
        'x-expect': 'must be a mapping with name and rules and/or password (or passwordEnv)',
        properties: {
          name: { type: 'string', pattern: '^\\S+$', 'x-expect': 'must be a user name without spaces' },
          password,
          passwordEnv,
          rules: { type: 'string', 'x-expect': 'must be a string of Valkey ACL rules, e.g. "on >secret ~app:* +@read"' },
          upstream: userUpstream,
          // a namespace: no glob characters, braces (the stored name keeps the client's hash tag) or spaces
          keyPrefix: { type: 'string', minLength: 1, pattern: '^[^\\s{}*?\\[\\]\\\\]+$', 'x-expect': 'must be a non-empty prefix without spaces, braces, or glob characters (* ? [ ] \\)' },
          tenant: { type: 'string', pattern: TENANT_NAME, 'x-expect': 'must be the name of one of tenants[]' },
        },
      },
    },
    // Applications sharing this respool (src/tenants): their users' namespace and limits.
    tenants: {
      type: 'array',
      'x-expect': 'must be a list of { name, keyPrefix?, upstreams?, limits? } mappings',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name'],
        'x-expect': 'must be a mapping with name, and keyPrefix, upstreams (mode, upstreamAuth, upstreamTls) and/or limits',
        properties: {
          name: { type: 'string', pattern: TENANT_NAME, 'x-expect': 'must be a name of letters, digits, _, - or .' },
          keyPrefix: { type: 'string', minLength: 1, pattern: '^[^\\s{}*?\\[\\]\\\\]+$', 'x-expect': 'must be a non-empty prefix without spaces, braces, or glob characters (* ? [ ] \\)' },
          // its own cluster or server, with its own pools, topology, identity and TLS (backend.ts)
          upstreams: { type: 'array', minItems: 1, items: hostPort, 'x-expect': 'must be a list of host:port strings, at least one' },
          mode: { enum: [...MODES], 'x-expect': `must be one of ${MODES.join(', ')}` },
          upstreamAuth: upstreamAuthSchema(),
          upstreamTls: UPSTREAM_TLS_SCHEMA,
          // higher is slowed later when a node saturates (src/tenants/tenant-shedding.ts)
          priority: { type: 'integer', minimum: -1000, maximum: 1000, 'x-expect': 'must be a whole number from -1000 to 1000 (higher: slowed later)' },
          limits: {
            type: 'object',
            additionalProperties: false,
            'x-expect': 'must be a mapping of opsPerSecond, bytesPerSecond, maxClients, maxInflight',
            properties: {
              opsPerSecond: { type: 'number', exclusiveMinimum: 0, 'x-expect': 'must be a number of requests per second above 0' },
              bytesPerSecond: { type: ['number', 'string'], 'x-expect': 'must be a size per second such as 50mb or 50000000' },
              maxClients: { type: 'integer', minimum: 1, 'x-expect': 'must be a whole number of clients, at least 1' },
              maxInflight: { type: 'integer', minimum: 1, 'x-expect': 'must be a whole number of replies, at least 1' },
            },
          },
        },
      },
    },
    acl: aclSchema(),
    limits: limitsSchema(),
    timeouts: numericGroup('timeouts'),
    cluster: clusterSchema(),
    resilience: numericGroup('resilience'),
    clients: {
      ...numericGroup('clients'),
      properties: {
        ...(numericGroup('clients').properties as Record<string, Schema>),
        scriptCommandCounts: { enum: [...SCRIPT_COMMAND_COUNTS], 'x-expect': `must be one of ${SCRIPT_COMMAND_COUNTS.join(', ')}` },
      },
    },
    reads: readsSchema(),
    hotKeys: HOT_KEYS_SCHEMA,
    dedicated: withSwitches('dedicated'),
    pubsub: numericGroup('pubsub'),
    admission: numericGroup('admission'),
    // MULTI … EXEC over several slots: split into one block per slot, or refused (CROSSSLOT)
    transactions: {
      type: 'object',
      additionalProperties: false,
      'x-expect': 'must be a mapping',
      properties: {
        crossSlot: { enum: [...CROSS_SLOT_TRANSACTIONS], 'x-expect': `must be one of ${CROSS_SLOT_TRANSACTIONS.join(', ')}` },
      },
    },
    // Keys stored under one hash tag, so WATCH, MULTI and scripts over them run on one node
    // (src/keys/colocation.ts): a key matching `keys` is stored as "{tag}" + its name.
    colocate: {
      type: 'array',
      'x-expect': 'must be a list of { keys, tag } mappings',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['keys', 'tag'],
        'x-expect': 'must be a mapping with keys (a glob) and tag (a name)',
        properties: {
          keys: { type: 'string', minLength: 1, 'x-expect': 'must be a glob such as "rq:*"' },
          tag: { type: 'string', pattern: '^[^{}]+$', 'x-expect': 'must be a non-empty name without { or }' },
        },
      },
    },
    // Values held in respool's memory (src/nearcache): keys named by globs, bounded in bytes and age.
    nearCache: {
      ...withSwitches('nearCache'),
      properties: {
        ...(withSwitches('nearCache').properties as Record<string, Schema>),
        keys: { type: 'array', items: { type: 'string', minLength: 1 }, 'x-expect': 'must be a list of globs such as "user:*"' },
        confirm: { enum: [...NEAR_CACHE_CONFIRM], 'x-expect': `must be one of ${NEAR_CACHE_CONFIRM.join(', ')}` },
      },
    },
    // A live migration (src/migration): the target's credentials and TLS, the copy's pace, where progress is saved.
    migration: {
      ...withSwitches('migration'),
      properties: {
        ...(withSwitches('migration').properties as Record<string, Schema>),
        upstreamAuth: upstreamAuthSchema(),
        upstreamTls: UPSTREAM_TLS_SCHEMA,
        stateFile: { type: 'string', minLength: 1, 'x-expect': 'must be a file path' },
      },
    },
    slowlog: numericGroup('slowlog'),
    commandlog: numericGroup('commandlog'),
    latency: withSwitches('latency'),
    saturation: numericGroup('saturation'),
    bigKeys: withSwitches('bigKeys'),
    logLevel: { enum: [...LOG_LEVELS], 'x-expect': `must be one of ${LOG_LEVELS.join(', ')}` },
  },
};
