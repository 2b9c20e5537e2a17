import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { ConfigError, parseCommandLine, type RespoolConfig } from '../../src/config/load-config.js';
import { formatHostPort, toDuration, toHostPort, toSize } from '../../src/config/values.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'respool-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let fileCount = 0;
/** Writes a YAML file and returns its path. */
function yamlFile(text: string, name = `c${++fileCount}.yaml`): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function run(argv: string[], env: NodeJS.ProcessEnv = {}): RespoolConfig {
  const r = parseCommandLine(argv, env);
  if (r.kind !== 'run') throw new Error(`expected run, got ${r.kind}`);
  return r.config;
}

/** The ConfigError message parseCommandLine throws. */
function errorOf(argv: string[], env: NodeJS.ProcessEnv = {}): string {
  try {
    parseCommandLine(argv, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
}

const UP = ['--upstream', '127.0.0.1:7000'];

describe('defaults', () => {
  it('fills every setting but the upstream from the contract defaults', () => {
    const config = run(UP);
    expect(config).toEqual({
      listen: { host: '127.0.0.1', port: 6380 },
      upstreams: [{ host: '127.0.0.1', port: 7000 }],
      mode: 'auto',
      admin: null,
      connectionsPerNode: 2,
      workers: 1,
      supervised: false,
      upstreamAuth: null,
      users: [],
      limits: {
        maxBulkLength: 512 * 1024 * 1024,
        maxArrayLength: 1_048_576,
        maxInlineLength: 64 * 1024,
        maxNestingDepth: 128,
        maxPendingPerClient: 10_000,
        maxQueryBytesPerClient: 1024 * 1024 * 1024,
        maxCrossSlotCopyBytes: 16 * 1024 * 1024,
        maxMemory: 'auto',
      },
      timeouts: { connectMs: 2000, commandMs: 5000, adminCommandMs: 600_000 },
      cluster: {
        maxRedirects: 5,
        refreshMinIntervalMs: 1000,
        refreshPeriodMs: 30_000,
        retryBudget: 3,
        retryBaseMs: 50,
        retryMaxMs: 1000,
        announce: null,
        peers: [],
        peersFrom: null, peersResolveMs: 5000, peerCheckMs: 500, peerCheckTimeoutMs: 500,
        peerDownAfterMs: 1500, peerRejoinAfterMs: 5000, fleetState: 'auto', fleetLeaseMs: 2000,
      },
      logLevel: 'info',
      resilience: {
        backoffBaseMs: 100,
        backoffCapMs: 5000,
        dialAttemptsPerWindow: 10,
        dialWindowMs: 15_000,
        retryBudgetPercent: 10,
        retryBudgetMinPerSecond: 10,
        circuitFailureThreshold: 3,
        queueWindowMs: 250,
        maxQueuedPerNode: 10_000,
        maxQueuedBytesPerNode: 64 * 1024 * 1024,
        maxInflightPerLink: 10_000,
        maxInflightBytesPerLink: 64 * 1024 * 1024,
        maxInflightPerProcess: 200_000,
        maxInflightBytesPerProcess: 512 * 1024 * 1024,
      },
      clients: {
        maxClients: 10_000,
        acceptRatePerSecond: 20000,
        idleTimeoutMs: 0,
        maxOutputBytesPerClient: 64 * 1024 * 1024,
        outputStallMs: 10_000,
        tcpKeepAliveMs: 300_000,
        scriptCommandCounts: 'self',
      },
      reads: {
        strategy: 'primary',
        zone: null,
        zoneFrom: 'off',
        metadataBaseUrl: null,
        metadataTimeoutMs: 1000,
        maxReplicaLagBytes: 0,
        prefixes: [],
      },
      hotKeys: {
        detection: { enabled: true, sampleRate: 0.01, windowMs: 10_000, topK: 10, keyNamesInMetrics: false },
        split: [],
        autoSplit: { enabled: false, share: 0.5, copies: null },
        readChoice: 'roundRobin',
        maxCopyAge: 10_000,
      },
      dedicated: { maxPerNode: 1000, maxTotal: 10_000, acquireTimeoutMs: 1000, idleMs: 30_000, blockMarginMs: 5000, maxReplicaStreams: 4, parkPops: true },
      pubsub: { maxOutputBytesPerClient: 32 * 1_048_576 },
      admission: { sliceRequests: 64, sliceBytes: 16 * 1024, maxInflightPerClient: 128, maxInflightReplyBytesPerClient: 2 * 1_048_576, bulkConnectionsPerNode: 1 },
      transactions: { crossSlot: 'split' },
      colocate: [],
      nearCache: { keys: [], hot: false, coalesceAll: false, confirm: 'auto', maxBytes: 64 * 1024 * 1024, maxEntryBytes: 1024 * 1024, maxAgeMs: 10_000 },
      migration: { maxKeysPerSecond: 5_000, maxBytesPerSecond: 32 * 1024 * 1024, paceByLatency: true, maxP99RisePercent: 20, maxPayloadBytes: 256 * 1024 * 1024, batchKeys: 100, copiesInFlight: 4, verifySample: 1_000, cutoverMaxPauseMs: 2_000, rollbackWindowMs: 0, stateFile: 'respool-migration.json' },
      tenants: [],
      slowlog: { thresholdUs: 10_000, maxLen: 128 },
      commandlog: { largeRequestBytes: 1_048_576, largeRequestMaxLen: 128, largeReplyBytes: 1_048_576, largeReplyMaxLen: 128 },
      latency: { tracking: true },
      saturation: { p99Ms: 10, cpuPercent: 90, cpuSampleMs: 10_000 },
      bigKeys: { enabled: true, topK: 10 },
      adminToken: null,
      adminReadToken: null,
      unixSocket: null,
      unixSocketMode: 0o660,
      acl: { file: null, upstream: 'auto', mirrorPrefix: 'respool.', mirrorSecret: null, logMaxLen: 128 },
      listenTls: null,
      tls: { cert: null, key: null, ca: null, requireClientCert: false, minVersion: 'TLSv1.2', ciphers: null },
      upstreamTls: { enabled: false, ca: null, cert: null, key: null, servername: null, rejectUnauthorized: true },
    } satisfies RespoolConfig);
  });

  it('returns fresh, mutable objects and leaves DEFAULT_CONFIG alone', () => {
    const a = run(UP);
    a.limits.maxBulkLength = 1;
    expect(run(UP).limits.maxBulkLength).toBe(512 * 1024 * 1024);
    expect(DEFAULT_CONFIG.limits.maxBulkLength).toBe(512 * 1024 * 1024);
    expect(Object.isFrozen(DEFAULT_CONFIG.limits)).toBe(true);
  });

  it('requires an upstream', () => {
    expect(errorOf([])).toBe('--upstream (or upstreams: in the config file) is required');
    expect(errorOf(['--config', yamlFile('logLevel: debug\n')])).toBe(
      '--upstream (or upstreams: in the config file) is required',
    );
  });
});

describe('flags', () => {
  it('reads every flag', () => {
    const config = run(
      [
        '--listen', '0.0.0.0:7379',
        '--upstream', '10.0.0.1:7000,10.0.0.2:7000',
        '--upstream=10.0.0.3:7000',
        '--mode', 'cluster',
        '--admin', '127.0.0.1:9121',
        '--connections-per-node', '8',
        '--upstream-user', 'proxy',
        '--upstream-password', 's3cret',
        '--max-bulk-length', '64mb',
        '--max-pending-per-client', '500',
        '--max-query-bytes-per-client', '128mb',
        '--connect-timeout', '750ms',
        '--command-timeout', '10s',
        '--max-redirects', '2',
        '--refresh-period', '1m',
        '--log-level', 'debug',
      ],
      { RESPOOL_UPSTREAM_PASSWORD: 'ignored, the flag wins' },
    );
    expect(config.listen).toEqual({ host: '0.0.0.0', port: 7379 });
    expect(config.upstreams.map(formatHostPort)).toEqual(['10.0.0.1:7000', '10.0.0.2:7000', '10.0.0.3:7000']);
    expect(config.mode).toBe('cluster');
    expect(config.admin).toEqual({ host: '127.0.0.1', port: 9121 });
    expect(config.connectionsPerNode).toBe(8);
    expect(config.upstreamAuth).toEqual({ username: 'proxy', password: 's3cret' });
    expect(config.limits.maxBulkLength).toBe(64 * 1024 * 1024);
    expect(config.limits.maxPendingPerClient).toBe(500);
    expect(config.limits.maxQueryBytesPerClient).toBe(128 * 1024 * 1024);
    expect(config.timeouts).toEqual({ connectMs: 750, commandMs: 10_000, adminCommandMs: 600_000 });
    expect(config.cluster.maxRedirects).toBe(2);
    expect(config.cluster.refreshPeriodMs).toBe(60_000);
    expect(config.logLevel).toBe('debug');
  });

  it('accepts IPv6 in brackets and port 0 for listen and admin', () => {
    const config = run(['--upstream', '[::1]:6379', '--listen', '[::]:0', '--admin', '127.0.0.1:0']);
    expect(config.upstreams).toEqual([{ host: '::1', port: 6379 }]);
    expect(config.listen).toEqual({ host: '::', port: 0 });
    expect(config.admin).toEqual({ host: '127.0.0.1', port: 0 });
    expect(formatHostPort(config.upstreams[0]!)).toBe('[::1]:6379');
  });

  it('drops repeated upstreams', () => {
    expect(run(['--upstream', 'a:1,a:1', '--upstream', 'a:1']).upstreams).toEqual([{ host: 'a', port: 1 }]);
  });

  it('--help and --version', () => {
    const help = parseCommandLine(['--help']);
    expect(help.kind).toBe('help');
    if (help.kind !== 'help') return;
    for (const flag of [
      '--listen', '--upstream', '--mode', '--admin', '--config', '--connections-per-node', '--upstream-user',
      '--upstream-password', '--max-bulk-length', '--max-pending-per-client', '--max-query-bytes-per-client',
      '--connect-timeout', '--command-timeout', '--max-redirects', '--refresh-period', '--log-level', '--help',
      '--version', 'RESPOOL_UPSTREAM_PASSWORD',
    ]) {
      expect(help.text).toContain(flag);
    }
    expect(help.text).toContain('[default: 127.0.0.1:6380]');
    expect(help.text).toContain('[default: 512mb]');
    expect(help.text).toContain('[default: 30s]');
    expect(help.text).toMatch(/Exit codes:\n\s+0\s+ok\n\s+2\s+bad/);
    for (const line of help.text.split('\n')) expect(line.length).toBeLessThanOrEqual(100);
    // --help wins even over mistakes elsewhere on the line.
    expect(parseCommandLine(['--listn', 'x', '-h']).kind).toBe('help');

    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    expect(parseCommandLine(['--version'])).toEqual({ kind: 'version', text: `respool ${pkg.version}` });
    expect(parseCommandLine(['-v']).kind).toBe('version');
  });

  it('reads the upstream password from RESPOOL_UPSTREAM_PASSWORD', () => {
    expect(run(UP, { RESPOOL_UPSTREAM_PASSWORD: 'pw' }).upstreamAuth).toEqual({ username: null, password: 'pw' });
    expect(run([...UP, '--upstream-user', 'u'], { RESPOOL_UPSTREAM_PASSWORD: 'pw' }).upstreamAuth).toEqual({
      username: 'u',
      password: 'pw',
    });
    // Set but empty counts as unset.
    expect(run(UP, { RESPOOL_UPSTREAM_PASSWORD: '' }).upstreamAuth).toBeNull();
  });
});

describe('flag errors', () => {
  it('names the flag and the value', () => {
    expect(errorOf([...UP, '--connections-per-node', 'zero'])).toBe(
      '--connections-per-node: must be an integer from 1 to 64 (got "zero")',
    );
    expect(errorOf([...UP, '--connections-per-node', '65'])).toBe(
      '--connections-per-node: must be an integer from 1 to 64 (got "65")',
    );
    expect(errorOf(['--upstream', 'localhost'])).toBe('--upstream: expected host:port (got "localhost")');
    expect(errorOf(['--upstream', '127.0.0.1:7000,localhost'])).toBe(
      '--upstream: expected host:port (got "localhost")',
    );
    expect(errorOf(['--listn', '127.0.0.1:1'])).toBe('unknown option --listn (did you mean --listen?)');
    expect(errorOf(['--connectionsPerNode', '3'])).toBe(
      'unknown option --connectionsPerNode (did you mean --connections-per-node?)',
    );
    expect(errorOf(['--frobnicate'])).toBe('unknown option --frobnicate');
    expect(errorOf(['-x'])).toBe('unknown option -x');
  });

  it('reports other mistakes precisely', () => {
    expect(errorOf(['--upstream'])).toMatch(/^--upstream: missing value/);
    expect(errorOf(['--upstream', '--listen', 'a:1'])).toMatch(/^--upstream: missing value before --listen/);
    expect(errorOf(['stray'])).toMatch(/^unexpected argument "stray"/);
    expect(errorOf(['--help=yes'])).toBe('--help does not take a value');
    expect(errorOf([...UP, '--mode', 'clustr'])).toBe(
      '--mode: must be one of auto, cluster, standalone (got "clustr", did you mean "cluster"?)',
    );
    expect(errorOf([...UP, '--log-level', 'verbose'])).toMatch(/^--log-level: must be one of fatal, error/);
    expect(errorOf(['--upstream', '127.0.0.1:0'])).toBe('--upstream: port must be from 1 to 65535 (got "127.0.0.1:0")');
    expect(errorOf([...UP, '--listen', '127.0.0.1:65536'])).toBe(
      '--listen: port must be from 0 to 65535 (got "127.0.0.1:65536")',
    );
    expect(errorOf(['--upstream', '::1:6379'])).toMatch(/^--upstream: expected host:port, with an IPv6 address in brackets/);
    expect(errorOf(['--upstream', '[nope]:6379'])).toMatch(/^--upstream: expected host:port, "\[nope\]" is not an IPv6/);
    expect(errorOf([...UP, '--max-bulk-length', 'lots'])).toBe('--max-bulk-length: must be a size like 512mb (got "lots")');
    expect(errorOf([...UP, '--max-bulk-length', '0'])).toBe('--max-bulk-length: must be a size from 1b to 2gb (got "0")');
    expect(errorOf([...UP, '--connect-timeout', 'soon'])).toBe(
      '--connect-timeout: must be a duration like 5s or 200ms (got "soon")',
    );
    expect(errorOf([...UP, '--upstream-password', ''])).toBe('--upstream-password: must not be empty');
    expect(errorOf([...UP, '--upstream-user', 'bob'])).toMatch(/^upstream user "bob" needs a password/);
    expect(errorOf([...UP, '--admin', '127.0.0.1:6380'])).toBe(
      'config: admin and listen must be different addresses (both 127.0.0.1:6380)',
    );
  });

  it('reports every bad flag at once, one per line', () => {
    const message = errorOf(['--upstream', 'nope', '--max-redirects', 'many', '--refresh-period', 'often']);
    expect(message.split('\n')).toEqual([
      '--upstream: expected host:port (got "nope")',
      '--max-redirects: must be an integer from 0 to 100 (got "many")',
      '--refresh-period: must be a duration like 5s or 200ms (got "often")',
    ]);
  });
});

describe('sizes and durations', () => {
  const any = { min: 0, max: Number.MAX_SAFE_INTEGER };
  it.each([
    [0, 0], [1234, 1234], ['1234', 1234], ['10b', 10], ['64kb', 65_536], ['64KB', 65_536], ['64 kb', 65_536],
    ['512mb', 536_870_912], ['1gb', 1_073_741_824], ['1tb', 1024 ** 4], ['2kib', 2048], ['1mib', 1_048_576],
    ['1k', 1000], ['1m', 1_000_000], ['1g', 1_000_000_000], ['0.5kb', 512], ['1.5gb', 1.5 * 1024 ** 3],
  ])('size %j = %d bytes', (written, bytes) => {
    expect(toSize(written, any)).toBe(bytes);
  });

  it.each(['lots', '', '-1', '1.5', 'kb', '1 kb b', '12xb', -1, 1.5, true, null, '0.3kb'])('size %j is rejected', (written) => {
    expect(() => toSize(written, any)).toThrow(/must be (a size like 512mb|a whole number of bytes)/);
  });

  it.each([
    [0, 0], [250, 250], ['250', 250], ['200ms', 200], ['5s', 5000], ['1.5s', 1500], ['2m', 120_000], ['1h', 3_600_000],
    ['5S', 5000],
  ])('duration %j = %d ms', (written, ms) => {
    expect(toDuration(written, any)).toBe(ms);
  });

  it.each(['soon', '5 seconds', '1d', '-5s', '1.0001s', 2.5])('duration %j is rejected', (written) => {
    expect(() => toDuration(written, any)).toThrow(/must be a (duration like 5s or 200ms|whole number of milliseconds)/);
  });

  it('checks ranges after converting units', () => {
    expect(() => toSize('3gb', { min: 1, max: 2 * 1024 ** 3 })).toThrow('must be a size from 1b to 2gb (got "3gb")');
    expect(() => toDuration('0s', { min: 1, max: 1000 })).toThrow('must be a duration from 1ms to 1s (got "0s")');
  });

  it('parses host:port', () => {
    expect(toHostPort('valkey-0.valkey.svc:6379', false)).toEqual({ host: 'valkey-0.valkey.svc', port: 6379 });
    expect(toHostPort('[fe80::1]:7000', false)).toEqual({ host: 'fe80::1', port: 7000 });
    expect(() => toHostPort('host:', false)).toThrow('expected host:port (got "host:")');
    expect(() => toHostPort(':6379', false)).toThrow('expected host:port (got ":6379")');
    expect(() => toHostPort('a b:1', false)).toThrow('expected host:port (got "a b:1")');
    expect(() => toHostPort(6379, false)).toThrow('expected host:port (got 6379)');
  });
});

describe('config file', () => {
  it('reads every field', () => {
    const path = yamlFile(`
listen: "0.0.0.0:6390"
upstreams: ["127.0.0.1:7000", "[::1]:7001"]
mode: cluster
admin: "127.0.0.1:9121"
connectionsPerNode: 4
upstreamAuth: { username: proxy, password: pw }
users:
  - { name: alice, password: a }
  - { name: bob, passwordEnv: BOB_PW }
  - { name: app, rules: "on >secret ~app:* +@read +@write -@dangerous" }
limits:
  maxBulkLength: 1mb
  maxArrayLength: 1000
  maxInlineLength: 4096
  maxNestingDepth: 16
  maxPendingPerClient: 100
  maxQueryBytesPerClient: 8mb
  maxCrossSlotCopyBytes: 1mb
  maxMemory: 200mb
admission:
  sliceRequests: 32
  sliceBytes: 8kb
  maxInflightPerClient: 64
  maxInflightReplyBytesPerClient: 2mb
  bulkConnectionsPerNode: 2
transactions: { crossSlot: refuse }
colocate:
  - { keys: 'rq:*', tag: rq }
nearCache: { keys: ['user:*', 'conf:?'], hot: true, coalesceAll: true, confirm: always, maxBytes: 16mb, maxEntryBytes: 64kb, maxAgeMs: 5s }
timeouts: { connectMs: 1s, commandMs: 2500 }
cluster:
  maxRedirects: 3
  refreshMinIntervalMs: 500ms
  refreshPeriodMs: 1m
  retryBudget: 0
  retryBaseMs: 10
  retryMaxMs: 2s
resilience:
  backoffBaseMs: 50ms
  backoffCapMs: 2s
  dialAttemptsPerWindow: 5
  dialWindowMs: 2s
  retryBudgetPercent: 20
  retryBudgetMinPerSecond: 3
  circuitFailureThreshold: 2
  queueWindowMs: 100ms
  maxQueuedPerNode: 50
  maxQueuedBytesPerNode: 1mb
  maxInflightPerLink: 60
  maxInflightBytesPerLink: 2mb
  maxInflightPerProcess: 70
  maxInflightBytesPerProcess: 3mb
clients:
  maxClients: 500
  acceptRatePerSecond: 0
  idleTimeoutMs: 5m
  maxOutputBytesPerClient: 8mb
  outputStallMs: 3s
  tcpKeepAliveMs: 0
  scriptCommandCounts: always
logLevel: trace
`);
    expect(run(['--config', path], { BOB_PW: 'b' })).toEqual({
      listen: { host: '0.0.0.0', port: 6390 },
      upstreams: [{ host: '127.0.0.1', port: 7000 }, { host: '::1', port: 7001 }],
      mode: 'cluster',
      admin: { host: '127.0.0.1', port: 9121 },
      connectionsPerNode: 4,
      workers: 1,
      supervised: false,
      upstreamAuth: { username: 'proxy', password: 'pw' },
      users: [{ name: 'alice', password: 'a' }, { name: 'bob', password: 'b' }, { name: 'app', rules: 'on >secret ~app:* +@read +@write -@dangerous' }],
      limits: {
        maxBulkLength: 1_048_576, maxArrayLength: 1000, maxInlineLength: 4096, maxNestingDepth: 16,
        maxPendingPerClient: 100, maxQueryBytesPerClient: 8 * 1_048_576, maxCrossSlotCopyBytes: 1_048_576,
        maxMemory: 200 * 1_048_576,
      },
      timeouts: { connectMs: 1000, commandMs: 2500, adminCommandMs: 600_000 },
      cluster: {
        maxRedirects: 3, refreshMinIntervalMs: 500, refreshPeriodMs: 60_000, retryBudget: 0, retryBaseMs: 10,
        retryMaxMs: 2000, announce: null, peers: [],
        peersFrom: null, peersResolveMs: 5000, peerCheckMs: 500, peerCheckTimeoutMs: 500,
        peerDownAfterMs: 1500, peerRejoinAfterMs: 5000, fleetState: 'auto', fleetLeaseMs: 2000,
      },
      resilience: {
        backoffBaseMs: 50, backoffCapMs: 2000, dialAttemptsPerWindow: 5, dialWindowMs: 2000,
        retryBudgetPercent: 20, retryBudgetMinPerSecond: 3, circuitFailureThreshold: 2, queueWindowMs: 100,
        maxQueuedPerNode: 50, maxQueuedBytesPerNode: 1_048_576, maxInflightPerLink: 60,
        maxInflightBytesPerLink: 2 * 1_048_576, maxInflightPerProcess: 70, maxInflightBytesPerProcess: 3 * 1_048_576,
      },
      clients: {
        maxClients: 500, acceptRatePerSecond: 0, idleTimeoutMs: 300_000, maxOutputBytesPerClient: 8 * 1_048_576,
        outputStallMs: 3000, tcpKeepAliveMs: 0, scriptCommandCounts: 'always',
      },
      logLevel: 'trace',
      reads: { ...DEFAULT_CONFIG.reads, prefixes: [] },
      hotKeys: DEFAULT_CONFIG.hotKeys,
      dedicated: DEFAULT_CONFIG.dedicated,
      pubsub: DEFAULT_CONFIG.pubsub,
      admission: { sliceRequests: 32, sliceBytes: 8192, maxInflightPerClient: 64, maxInflightReplyBytesPerClient: 2 * 1_048_576, bulkConnectionsPerNode: 2 },
      transactions: { crossSlot: 'refuse' },
      colocate: [{ keys: 'rq:*', tag: 'rq' }],
      nearCache: { keys: ['user:*', 'conf:?'], hot: true, coalesceAll: true, confirm: 'always', maxBytes: 16 * 1024 * 1024, maxEntryBytes: 64 * 1024, maxAgeMs: 5000 },
      migration: { maxKeysPerSecond: 5_000, maxBytesPerSecond: 32 * 1024 * 1024, paceByLatency: true, maxP99RisePercent: 20, maxPayloadBytes: 256 * 1024 * 1024, batchKeys: 100, copiesInFlight: 4, verifySample: 1_000, cutoverMaxPauseMs: 2_000, rollbackWindowMs: 0, stateFile: 'respool-migration.json' },
      tenants: [],
      slowlog: DEFAULT_CONFIG.slowlog,
      commandlog: DEFAULT_CONFIG.commandlog,
      latency: DEFAULT_CONFIG.latency,
      saturation: DEFAULT_CONFIG.saturation,
      bigKeys: DEFAULT_CONFIG.bigKeys,
      adminToken: null,
      adminReadToken: null,
      unixSocket: null,
      unixSocketMode: 0o660,
      acl: DEFAULT_CONFIG.acl,
      listenTls: null,
      tls: DEFAULT_CONFIG.tls,
      upstreamTls: DEFAULT_CONFIG.upstreamTls,
    } satisfies RespoolConfig);
  });

  it('keeps defaults for what it leaves out; an empty file is fine', () => {
    const config = run(['--config', yamlFile('upstreams: ["a:1"]\nlimits: { maxBulkLength: 1kb }\n')]);
    expect(config.limits).toEqual({ ...DEFAULT_CONFIG.limits, maxBulkLength: 1024 });
    expect(run([...UP, '--config', yamlFile('')]).listen).toEqual(DEFAULT_CONFIG.listen);
    expect(run([...UP, '-c', yamlFile('# only a comment\n')]).mode).toBe('auto');
  });

  it('loses to flags, field by field', () => {
    const path = yamlFile(`
listen: "0.0.0.0:6390"
upstreams: ["10.0.0.1:7000", "10.0.0.2:7000"]
connectionsPerNode: 4
admin: "127.0.0.1:9121"
upstreamAuth: { username: fromfile, password: filepw }
limits: { maxBulkLength: 1mb, maxPendingPerClient: 7 }
timeouts: { connectMs: 1s }
logLevel: warn
`);
    const config = run(
      ['--config', path, '--upstream', '127.0.0.1:7000', '--connections-per-node', '9', '--max-bulk-length', '2mb',
        '--admin', 'off', '--log-level', 'error'],
      { RESPOOL_UPSTREAM_PASSWORD: 'envpw' },
    );
    expect(config.listen).toEqual({ host: '0.0.0.0', port: 6390 }); // from the file
    expect(config.upstreams).toEqual([{ host: '127.0.0.1', port: 7000 }]); // replaced, not appended
    expect(config.connectionsPerNode).toBe(9);
    expect(config.admin).toBeNull();
    expect(config.limits.maxBulkLength).toBe(2 * 1_048_576);
    expect(config.limits.maxPendingPerClient).toBe(7); // from the file
    expect(config.timeouts).toEqual({ connectMs: 1000, commandMs: 5000, adminCommandMs: 600_000 }); // file, then default
    expect(config.logLevel).toBe('error');
    // The environment's password wins over the file's; the file's user name stays.
    expect(config.upstreamAuth).toEqual({ username: 'fromfile', password: 'envpw' });
  });

  it('takes a user name from the file and the password from the flag or the environment', () => {
    const path = yamlFile('upstreams: ["a:1"]\nupstreamAuth: { username: u }\n');
    expect(run(['--config', path], { RESPOOL_UPSTREAM_PASSWORD: 'pw' }).upstreamAuth).toEqual({ username: 'u', password: 'pw' });
    expect(run(['--config', path, '--upstream-password', 'p2']).upstreamAuth).toEqual({ username: 'u', password: 'p2' });
    expect(errorOf(['--config', path])).toBe(
      'upstream user "u" needs a password: --upstream-password, RESPOOL_UPSTREAM_PASSWORD, '
        + 'or upstreamAuth.password in the config file',
    );
  });

  it('reads passwords from the environment with passwordEnv', () => {
    const path = yamlFile('upstreams: ["a:1"]\nupstreamAuth: { passwordEnv: VALKEY_PW }\n', 'env.yaml');
    expect(run(['--config', path], { VALKEY_PW: 'pw' }).upstreamAuth).toEqual({ username: null, password: 'pw' });
    expect(errorOf(['--config', path], {})).toBe(
      `config file ${path}: upstreamAuth: passwordEnv: environment variable VALKEY_PW is not set`,
    );
    expect(errorOf(['--config', path], { VALKEY_PW: '' })).toMatch(/VALKEY_PW is empty$/);
  });
});

describe('config file errors', () => {
  it('names the file and the field', () => {
    const path = yamlFile('upstreams: ["a:1"]\nlimits:\n  maxBulkLength: lots\n', 'respool.yaml');
    expect(errorOf(['--config', path])).toBe(
      `config file ${path}: limits.maxBulkLength: must be a size like 512mb (got "lots")`,
    );
    // The file is named as the user wrote it.
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      expect(errorOf(['--config', 'respool.yaml'])).toBe(
        'config file respool.yaml: limits.maxBulkLength: must be a size like 512mb (got "lots")',
      );
    } finally {
      process.chdir(cwd);
    }
  });

  it('rejects unknown keys, suggesting the right one', () => {
    const path = yamlFile('upstreams: ["a:1"]\nconectionsPerNode: 3\n', 'x.yaml');
    expect(errorOf(['--config', path])).toBe(
      `config file ${path}: unknown field "conectionsPerNode" at top level (did you mean "connectionsPerNode"?)`,
    );
    const nested = yamlFile('upstreams: ["a:1"]\nlimits:\n  max_bulk_length: 1mb\n  colour: blue\n');
    expect(errorOf(['--config', nested]).split('\n')).toEqual([
      `config file ${nested}: unknown field "max_bulk_length" in limits (did you mean "maxBulkLength"?)`,
      `config file ${nested}: unknown field "colour" in limits`,
    ]);
    const misplaced = yamlFile('upstreams: ["a:1"]\nmaxBulkLength: 1mb\n');
    expect(errorOf(['--config', misplaced])).toBe(
      `config file ${misplaced}: unknown field "maxBulkLength" at top level (did you mean "limits.maxBulkLength"?)`,
    );
    const user = yamlFile('upstreams: ["a:1"]\nusers: [{ name: a, pasword: x }]\n');
    expect(errorOf(['--config', user])).toMatch(/unknown field "pasword" in users\[0\] \(did you mean "password"\?\)/);
  });

  it('reports YAML syntax errors with line and column', () => {
    const path = yamlFile('upstreams: ["a:1"]\nlimits:\n  maxBulkLength: [1mb\n');
    expect(errorOf(['--config', path])).toMatch(new RegExp(`^config file ${path}:\\d+:\\d+: YAML syntax error: `));
    const tabs = yamlFile('upstreams:\n  - "a:1"\n bad: indent\n');
    expect(errorOf(['--config', tabs])).toMatch(new RegExp(`^config file ${tabs}:3:\\d+: YAML syntax error: `));
    const ipv6 = yamlFile('upstreams:\n  - [::1]:6379\n');
    expect(errorOf(['--config', ipv6])).toMatch(/:2:\d+: YAML syntax error: .*\(put IPv6 addresses in quotes: "\[::1\]:6379"\)$/);
    const dup = yamlFile('logLevel: info\nlogLevel: debug\n');
    expect(errorOf(['--config', dup])).toMatch(new RegExp(`^config file ${dup}:2:1: YAML syntax error: .*unique`));
  });

  it('reports every problem in the file at once', () => {
    const path = yamlFile(`
upstreams: ["localhost", "a:70000", "b:1"]
mode: clustr
connectionsPerNode: 0
admin: 9121
limits: { maxBulkLength: 0kb, maxNestingDepth: 1.5 }
timeouts: { connectMs: soon }
logLevel: loud
`);
    const lines = errorOf(['--config', path]).split('\n').map((l) => l.replace(`config file ${path}: `, ''));
    expect(lines.sort()).toEqual(
      [
        'upstreams[0]: expected host:port (got "localhost")',
        'upstreams[1]: port must be from 1 to 65535 (got "a:70000")',
        'mode: must be one of auto, cluster, standalone (got "clustr", did you mean "cluster"?)',
        'connectionsPerNode: must be an integer from 1 to 64 (got 0)',
        'admin: expected host:port, null, or a mapping with address, token, tokenFile, readToken, readTokenFile (got 9121)',
        'limits.maxBulkLength: must be a size from 1b to 2gb (got "0kb")',
        'limits.maxNestingDepth: must be an integer from 1 to 1000 (got 1.5)',
        'timeouts.connectMs: must be a duration like 5s or 200ms (got "soon")',
        'logLevel: must be one of fatal, error, warn, info, debug, trace (got "loud")',
      ].sort(),
    );
  });

  it('checks shapes, passwords and users', () => {
    const cases: Array<[string, string | RegExp]> = [
      ['- a\n- b\n', 'must be a mapping of settings (got a list)'],
      ['upstreams: "a:1"\n', 'upstreams: must be a list of host:port strings, at least one (got "a:1")'],
      ['upstreams: []\n', 'upstreams: must be a list of host:port strings, at least one (got [])'],
      ['upstreams: ["a:1"]\nlimits: 5\n', 'limits: must be a mapping (got 5)'],
      ['upstreams: ["a:1"]\nusers: [{ name: a }]\n', 'users[0]: needs rules, password or passwordEnv'],
      ['upstreams: ["a:1"]\nusers: [{ name: a, rules: "on >x +@nope" }]\n',
        'users[0]: rules: "+@nope": Unknown command or category name in ACL'],
      ['upstreams: ["a:1"]\nusers: [{ name: a, rules: "on ~* ~app:*" }]\n', /users\[0\]: rules: "~app:\*": Adding a pattern after the \* pattern/],
      ['upstreams: ["a:1"]\nusers: [{ name: a, rules: "on #abc" }]\n',
        'users[0]: rules: "#<redacted>": The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters'],
      ['upstreams: ["a:1"]\nusers: [{ name: a, rules: 5 }]\n', /users\[0\]\.rules: must be a string of Valkey ACL rules/],
      ['upstreams: ["a:1"]\nupstreamAuth: { password: p, passwordEnv: P }\n',
        'upstreamAuth: give password or passwordEnv, not both'],
      ['upstreams: ["a:1"]\nupstreamAuth: { passwordEnv: "not a name" }\n',
        'upstreamAuth.passwordEnv: must be the name of an environment variable (got "not a name")'],
      ['upstreams: ["a:1"]\nusers: [{ password: p }]\n', 'users[0]: missing field "name"'],
      ['upstreams: ["a:1"]\nusers: [{ name: a, password: p }, { name: a, password: q }]\n',
        'users[1]: user "a" is already defined in users[0]'],
      ['upstreams: ["a:1"]\ncluster: { retryBaseMs: 2s, retryMaxMs: 1s }\n',
        /^config: cluster\.retryBaseMs \(2s\) must not exceed cluster\.retryMaxMs \(1s\)$/],
    ];
    for (const [text, expected] of cases) {
      const path = yamlFile(text);
      const message = errorOf(['--config', path]);
      if (typeof expected === 'string') expect(message).toBe(`config file ${path}: ${expected}`);
      else expect(message).toMatch(expected);
    }
  });

  it('reports a missing file', () => {
    expect(errorOf(['--config', join(dir, 'missing.yaml')])).toBe(
      `config file ${join(dir, 'missing.yaml')}: cannot read it (no such file)`,
    );
  });

  it('reports file and flag problems together', () => {
    const path = yamlFile('upstreams: ["a:1"]\nmode: nope\n');
    expect(errorOf(['--config', path, '--max-redirects', 'many']).split('\n')).toHaveLength(2);
  });
});

describe('example configs in config/', () => {
  it.each(['sidecar.yaml', 'central-proxy.yaml'])('%s loads without errors', (name) => {
    const config = run(['--config', join(repoRoot, 'config', name)]);
    expect(config.upstreams.length).toBeGreaterThan(0);
  });

  it('sidecar: one local upstream, small limits; central proxy: cluster seeds, admin, more links', () => {
    const sidecar = run(['--config', join(repoRoot, 'config', 'sidecar.yaml')]);
    expect(sidecar.upstreams).toEqual([{ host: '127.0.0.1', port: 6379 }]);
    expect(sidecar.admin).toBeNull();
    expect(sidecar.limits.maxBulkLength).toBeLessThan(DEFAULT_CONFIG.limits.maxBulkLength);
    expect(sidecar.limits.maxQueryBytesPerClient).toBeLessThan(DEFAULT_CONFIG.limits.maxQueryBytesPerClient);

    const central = run(['--config', join(repoRoot, 'config', 'central-proxy.yaml')]);
    expect(central.mode).toBe('cluster');
    expect(central.upstreams.length).toBeGreaterThan(1);
    expect(central.admin).not.toBeNull();
    expect(central.connectionsPerNode).toBeGreaterThan(DEFAULT_CONFIG.connectionsPerNode);
  });

  it('documents every setting of the file form in each example', () => {
    for (const name of ['sidecar.yaml', 'central-proxy.yaml']) {
      const text = readFileSync(join(repoRoot, 'config', name), 'utf8');
      for (const key of [
        'listen', 'upstreams', 'mode', 'admin', 'connectionsPerNode', 'upstreamAuth', 'passwordEnv', 'users',
        ...Object.keys(DEFAULT_CONFIG.limits), ...Object.keys(DEFAULT_CONFIG.timeouts),
        ...Object.keys(DEFAULT_CONFIG.cluster), 'logLevel',
      ]) {
        expect(text, `${name} mentions ${key}`).toMatch(new RegExp(`^#? *-? *${key}:`, 'm'));
      }
    }
  });
});

describe('cluster emulation (cluster.announce, cluster.peers)', () => {
  it('reads --cluster-announce and repeatable, comma-separated --cluster-peer (duplicates dropped)', () => {
    const config = run([
      ...UP, '--cluster-announce', 'proxy-a.internal:6379',
      '--cluster-peer', '10.0.0.2:6379,10.0.0.3:6379', '--cluster-peer', '[::1]:6379', '--cluster-peer', '10.0.0.2:6379',
    ]);
    expect(config.cluster.announce).toEqual({ host: 'proxy-a.internal', port: 6379 });
    expect(config.cluster.peers.map(formatHostPort)).toEqual(['10.0.0.2:6379', '10.0.0.3:6379', '[::1]:6379']);
  });

  it('reads cluster.announce and cluster.peers from the file; flags win', () => {
    const file = yamlFile('upstreams: ["a:1"]\ncluster:\n  announce: "10.0.0.1:6379"\n  peers: ["10.0.0.2:6379", "10.0.0.3:6379"]\n');
    const config = run(['--config', file]);
    expect(config.cluster.announce).toEqual({ host: '10.0.0.1', port: 6379 });
    expect(config.cluster.peers).toHaveLength(2);
    const flagged = run(['--config', file, '--cluster-peer', '10.0.0.9:6379', '--cluster-announce', '10.0.0.8:6379']);
    expect(flagged.cluster.peers).toEqual([{ host: '10.0.0.9', port: 6379 }]);
    expect(flagged.cluster.announce).toEqual({ host: '10.0.0.8', port: 6379 });
    expect(run(['--config', yamlFile('upstreams: ["a:1"]\ncluster: { announce: null }\n')]).cluster.announce).toBeNull();
  });

  it('reads fleet membership and shared state: peersFrom (dns:NAME:PORT), check timings, fleetState', () => {
    const file = yamlFile(`upstreams: ["a:1"]
cluster:
  peersFrom: "dns:respool-peers.prod.svc.cluster.local:6380"
  peersResolveMs: 2s
  peerCheckMs: 250ms
  peerCheckTimeoutMs: 300ms
  peerDownAfterMs: 1s
  peerRejoinAfterMs: 10s
  fleetState: upstream
  fleetLeaseMs: 3s
`);
    const c = run(['--config', file]);
    expect(c.cluster).toMatchObject({
      peersFrom: { kind: 'dns', name: 'respool-peers.prod.svc.cluster.local', port: 6380 },
      peersResolveMs: 2000, peerCheckMs: 250, peerCheckTimeoutMs: 300, peerDownAfterMs: 1000,
      peerRejoinAfterMs: 10_000, fleetState: 'upstream', fleetLeaseMs: 3000,
    });
    const flagged = run(['--config', file, '--cluster-peers-from', 'dns:other:7000', '--fleet-state', 'off', '--peer-down-after', '800ms']);
    expect(flagged.cluster.peersFrom).toEqual({ kind: 'dns', name: 'other', port: 7000 });
    expect(flagged.cluster.fleetState).toBe('off');
    expect(flagged.cluster.peerDownAfterMs).toBe(800);
    expect(run(['--config', file, '--cluster-peers-from', 'off']).cluster.peersFrom).toBeNull();
    expect(errorOf([...UP, '--cluster-peers-from', 'respool-peers:6380'])).toBe(
      '--cluster-peers-from: must be dns:NAME:PORT, e.g. dns:respool-peers.default.svc.cluster.local:6380 (got "respool-peers:6380")',
    );
    expect(errorOf([...UP, '--cluster-peers-from', 'dns:x:70000'])).toMatch(/^--cluster-peers-from: must be dns:NAME:PORT/);
    expect(errorOf(['--config', yamlFile('upstreams: ["a:1"]\ncluster: { fleetState: shared }\n')])).toMatch(
      /cluster\.fleetState: must be one of auto, upstream, off \(got "shared"/,
    );
  });

  it('reports bad addresses by flag and field', () => {
    expect(errorOf([...UP, '--cluster-announce', '0.0.0.0:6379'])).toBe(
      '--cluster-announce: must be an address clients can connect to, not a wildcard (got "0.0.0.0:6379")',
    );
    expect(errorOf([...UP, '--cluster-announce', '127.0.0.1:0'])).toBe(
      '--cluster-announce: port must be from 1 to 65535 (got "127.0.0.1:0")',
    );
    expect(errorOf([...UP, '--cluster-peer', 'proxy-b'])).toBe('--cluster-peer: expected host:port (got "proxy-b")');
    const path = yamlFile('upstreams: ["a:1"]\ncluster: { announce: 6379, peers: ["b:1", "[::]:2", "c"] }\n');
    const lines = errorOf(['--config', path]).split('\n').map((l) => l.replace(`config file ${path}: `, ''));
    expect(lines.sort()).toEqual([
      'cluster.announce: expected host:port or null (got 6379)',
      'cluster.peers[1]: must be an address clients can connect to, not a wildcard (got "[::]:2")',
      'cluster.peers[2]: expected host:port (got "c")',
    ]);
    expect(errorOf(['--config', yamlFile('upstreams: ["a:1"]\ncluster: { peers: "b:1" }\n')])).toMatch(
      /cluster\.peers: must be a list of host:port strings \(got "b:1"\)$/,
    );
  });
});

describe('reads (read strategies and zones)', () => {
  it('reads --read-strategy, --zone, --zone-from and --metadata-base-url', () => {
    const config = run([
      ...UP, '--read-strategy', 'azAffinity', '--zone', 'az-a', '--zone-from', 'gcp',
      '--metadata-base-url', 'http://127.0.0.1:8080/',
    ]);
    expect(config.reads).toMatchObject({
      strategy: 'azAffinity', zone: 'az-a', zoneFrom: 'gcp', metadataBaseUrl: 'http://127.0.0.1:8080',
    });
  });

  it('reads the reads section of the file, flags win', () => {
    const file = yamlFile(
      [
        'upstreams: ["127.0.0.1:7000"]',
        'reads:',
        '  strategy: preferReplica',
        '  zone: az-b',
        '  zoneFrom: aws',
        '  metadataBaseUrl: http://127.0.0.1:9999',
        '  metadataTimeoutMs: 300ms',
        '  maxReplicaLagBytes: 1mb',
        '  prefixes:',
        '    - { prefix: "session:", strategy: primary }',
        '    - { prefix: "cache:", strategy: azAffinityReplicasAndPrimary }',
        '',
      ].join('\n'),
    );
    const config = run(['--config', file]);
    expect(config.reads).toEqual({
      strategy: 'preferReplica',
      zone: 'az-b',
      zoneFrom: 'aws',
      metadataBaseUrl: 'http://127.0.0.1:9999',
      metadataTimeoutMs: 300,
      maxReplicaLagBytes: 1024 * 1024,
      prefixes: [
        { prefix: 'session:', strategy: 'primary' },
        { prefix: 'cache:', strategy: 'azAffinityReplicasAndPrimary' },
      ],
    });
    expect(run(['--config', file, '--read-strategy', 'azAffinity', '--zone', 'az-c']).reads).toMatchObject({
      strategy: 'azAffinity', zone: 'az-c',
    });
  });

  it('names the field of a bad value', () => {
    expect(errorOf([...UP, '--read-strategy', 'azaffinity'])).toBe(
      '--read-strategy: must be one of primary, preferReplica, azAffinity, azAffinityReplicasAndPrimary (got "azaffinity", did you mean "azAffinity"?)',
    );
    expect(errorOf([...UP, '--zone-from', 'ibm'])).toMatch(/^--zone-from: must be one of off, aws, gcp, azure/);
    expect(errorOf([...UP, '--metadata-base-url', 'ftp://x'])).toBe(
      '--metadata-base-url: must be an http:// or https:// URL (got "ftp://x")',
    );
    expect(errorOf([...UP, '--zone', 'az a'])).toBe('--zone: must be a zone name without spaces (got "az a")');
    const file = yamlFile(
      'upstreams: ["127.0.0.1:7000"]\nreads:\n  strategy: fastest\n  metadataTimeoutMs: 1m\n  prefixes:\n    - { prefix: "a:" }\n  colour: blue\n',
    );
    const message = errorOf(['--config', file]);
    expect(message).toMatch(/reads\.strategy: must be one of primary, preferReplica/);
    expect(message).toMatch(/reads\.metadataTimeoutMs: must be a duration from 1ms to 10s \(got "1m"\)/);
    expect(message).toMatch(/reads\.prefixes\[0\]: missing field "strategy"/);
    expect(message).toMatch(/unknown field "colour" in reads/);
  });

  it('refuses zoneFrom without a metadata URL (no built-in address is ever contacted)', () => {
    expect(errorOf([...UP, '--zone-from', 'aws'])).toMatch(/reads\.zoneFrom aws needs reads\.metadataBaseUrl/);
    expect(run([...UP, '--zone-from', 'off']).reads.metadataBaseUrl).toBeNull();
  });

  it('refuses the same prefix twice', () => {
    const file = yamlFile(
      'upstreams: ["127.0.0.1:7000"]\nreads:\n  prefixes:\n    - { prefix: "a:", strategy: primary }\n    - { prefix: "a:", strategy: preferReplica }\n',
    );
    expect(errorOf(['--config', file])).toMatch(/reads\.prefixes\[1\]: prefix "a:" is already listed in reads\.prefixes\[0\]/);
  });

  it('lists the flags in --help', () => {
    const r = parseCommandLine(['--help']);
    expect(r.kind).toBe('help');
    const text = (r as { text: string }).text;
    for (const flag of ['--read-strategy', '--zone NAME', '--zone-from', '--metadata-base-url', 'RESPOOL_ZONE']) expect(text).toContain(flag);
  });
});

describe('resilience and clients (issue 4)', () => {
  it('reads the client and dial flags', () => {
    const config = run([
      ...UP, '--max-clients', '20000', '--accept-rate', '0', '--idle-timeout', '30s',
      '--max-output-bytes-per-client', '16mb', '--tcp-keepalive', '60s',
      '--dial-attempts-per-window', '4', '--dial-window', '2s', '--queue-window', '0',
    ]);
    expect(config.clients).toEqual({
      maxClients: 20_000, acceptRatePerSecond: 0, idleTimeoutMs: 30_000,
      maxOutputBytesPerClient: 16 * 1024 * 1024, outputStallMs: 10_000, tcpKeepAliveMs: 60_000, scriptCommandCounts: 'self',
    });
    expect(config.resilience.dialAttemptsPerWindow).toBe(4);
    expect(config.resilience.dialWindowMs).toBe(2000);
    expect(config.resilience.queueWindowMs).toBe(0);
    // The existing per-request retry settings keep working next to the new section.
    expect(config.cluster.retryBudget).toBe(3);
  });

  it('names the field of a bad value, and checks base against cap', () => {
    expect(errorOf([...UP, '--max-clients', '0'])).toBe('--max-clients: must be an integer from 1 to 10000000 (got "0")');
    expect(errorOf([...UP, '--config', yamlFile('resilience: { queueWindowMs: fast }\n')])).toMatch(
      /resilience\.queueWindowMs: must be a duration like 5s or 200ms \(got "fast"\)/,
    );
    expect(errorOf([...UP, '--config', yamlFile('clients: { maxClient: 5 }\n')])).toMatch(
      /unknown field "maxClient" in clients \(did you mean "maxClients"\?\)/,
    );
    expect(errorOf([...UP, '--config', yamlFile('resilience: { backoffBaseMs: 10s, backoffCapMs: 1s }\n')])).toBe(
      'config: resilience.backoffBaseMs (10s) must not exceed resilience.backoffCapMs (1s)',
    );
  });

  it('lists the new flags in --help with their defaults', () => {
    const help = parseCommandLine(['--help']);
    if (help.kind !== 'help') throw new Error('expected help');
    for (const flag of ['--max-clients', '--accept-rate', '--idle-timeout', '--max-output-bytes-per-client', '--tcp-keepalive',
      '--dial-attempts-per-window', '--dial-window', '--queue-window']) {
      expect(help.text).toContain(flag);
    }
    expect(help.text).toContain('[default: 15s]');
    expect(help.text).toContain('[default: 250ms]');
  });
});

describe('workers', () => {
  it('takes a number of processes or auto, from a flag, the environment or the file', () => {
    expect(run(UP).workers).toBe(1);
    expect(run([...UP, '--workers', '4']).workers).toBe(4);
    expect(run([...UP, '--workers', 'auto']).workers).toBe('auto');
    expect(run(UP, { RESPOOL_WORKERS: '2' }).workers).toBe(2);
    expect(run([...UP, '--workers', '3'], { RESPOOL_WORKERS: '2' }).workers).toBe(3); // flags > env
    const dir = mkdtempSync(join(tmpdir(), 'respool-workers-'));
    const file = join(dir, 'w.yaml');
    writeFileSync(file, 'upstreams: ["127.0.0.1:7000"]\nworkers: auto\n');
    expect(run(['--config', file]).workers).toBe('auto');
  });

  it('supervised: the supervisor even for one worker (a takeover needs it), from a flag, the environment or the file', () => {
    expect(run(UP).supervised).toBe(false);
    expect(run([...UP, '--supervised']).supervised).toBe(true);
    expect(run(UP, { RESPOOL_SUPERVISED: 'true' }).supervised).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'respool-supervised-'));
    const file = join(dir, 's.yaml');
    writeFileSync(file, 'upstreams: ["127.0.0.1:7000"]\nsupervised: true\n');
    expect(run(['--config', file]).supervised).toBe(true);
    writeFileSync(file, 'upstreams: ["127.0.0.1:7000"]\nsupervised: yes please\n');
    expect(errorOf(['--config', file])).toMatch(/supervised: must be true or false/);
    expect(errorOf([...UP, '--supervised=yes'])).toMatch(/--supervised does not take a value/);
  });

  it('refuses anything else, naming the setting', () => {
    expect(errorOf([...UP, '--workers', '0'])).toMatch(/--workers: expected a number of processes \(1\.\.64\) or auto \(got "0"\)/);
    expect(errorOf([...UP, '--workers', 'many'])).toMatch(/--workers: expected a number of processes/);
  });
});
