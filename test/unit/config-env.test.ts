import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, parseCommandLine, type RespoolConfig } from '../../src/config/load-config.js';
import { envName, envSettings } from '../../src/config/env-config.js';
import { helpText } from '../../src/config/help-text.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';

const dir = mkdtempSync(join(tmpdir(), 'respool-env-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(argv: string[], env: NodeJS.ProcessEnv): RespoolConfig {
  const r = parseCommandLine(argv, env);
  if (r.kind !== 'run') throw new Error('expected run');
  return r.config;
}
function errorOf(argv: string[], env: NodeJS.ProcessEnv): string {
  try {
    parseCommandLine(argv, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('settings from RESPOOL_<PATH> environment variables', () => {
  it('names every setting of the file: RESPOOL_ + path in UPPER_SNAKE_CASE', () => {
    expect(envName('timeouts.commandMs')).toBe('RESPOOL_TIMEOUTS_COMMAND_MS');
    expect(envName('hotKeys.detection.sampleRate')).toBe('RESPOOL_HOT_KEYS_DETECTION_SAMPLE_RATE');
    expect(envName('connectionsPerNode')).toBe('RESPOOL_CONNECTIONS_PER_NODE');
    const names = envSettings().map((s) => s.name);
    expect(new Set(names).size).toBe(names.length); // no two settings share a variable
    for (const n of ['RESPOOL_UPSTREAMS', 'RESPOOL_LOG_LEVEL', 'RESPOOL_ADMIN_TOKEN', 'RESPOOL_RESILIENCE_MAX_INFLIGHT_PER_PROCESS', 'RESPOOL_READS_STRATEGY']) {
      expect(names).toContain(n);
      expect(helpText()).toContain(n);
    }
  });

  it('gives a whole config without a file (lists, sizes, durations, enums, nested groups)', () => {
    const c = run([], {
      RESPOOL_UPSTREAMS: '10.0.0.1:7000, 10.0.0.2:7000',
      RESPOOL_LISTEN: '0.0.0.0:6390',
      RESPOOL_MODE: 'cluster',
      RESPOOL_ADMIN: '127.0.0.1:9121',
      RESPOOL_CONNECTIONS_PER_NODE: '4',
      RESPOOL_LIMITS_MAX_BULK_LENGTH: '1mb',
      RESPOOL_TIMEOUTS_COMMAND_MS: '7s',
      RESPOOL_READS_STRATEGY: 'preferReplica',
      RESPOOL_READS_PREFIXES: '[{prefix: "s:", strategy: primary}]',
      RESPOOL_HOT_KEYS_DETECTION_ENABLED: 'false',
      RESPOOL_HOT_KEYS_DETECTION_SAMPLE_RATE: '0.05',
      RESPOOL_USERS: '[{name: app, password: secret}]',
      RESPOOL_LOG_LEVEL: 'warn',
      RESPOOL_CLUSTER_ANNOUNCE: 'null',
      UNRELATED: 'x',
    });
    expect(c.upstreams).toEqual([{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7000 }]);
    expect(c.listen).toEqual({ host: '0.0.0.0', port: 6390 });
    expect(c.mode).toBe('cluster');
    expect(c.admin).toEqual({ host: '127.0.0.1', port: 9121 });
    expect(c.connectionsPerNode).toBe(4);
    expect(c.limits.maxBulkLength).toBe(1024 * 1024);
    expect(c.timeouts).toEqual({ connectMs: DEFAULT_CONFIG.timeouts.connectMs, commandMs: 7000, adminCommandMs: DEFAULT_CONFIG.timeouts.adminCommandMs });
    expect(c.reads.strategy).toBe('preferReplica');
    expect(c.reads.prefixes).toEqual([{ prefix: 's:', strategy: 'primary' }]);
    expect(c.hotKeys.detection.enabled).toBe(false);
    expect(c.hotKeys.detection.sampleRate).toBe(0.05);
    expect(c.users).toEqual([expect.objectContaining({ name: 'app', password: 'secret' })]);
    expect(c.logLevel).toBe('warn');
    expect(c.cluster.announce).toBeNull();
  });

  it('precedence: flags > environment > file > defaults, setting by setting', () => {
    const file = join(dir, 'p.yaml');
    writeFileSync(file, 'upstreams: ["10.0.0.9:7000"]\ntimeouts: { commandMs: 1s, connectMs: 3s }\nconnectionsPerNode: 5\nlogLevel: error\n');
    const env = { RESPOOL_TIMEOUTS_COMMAND_MS: '2s', RESPOOL_CONNECTIONS_PER_NODE: '6' };
    const c = run(['--config', file, '--connections-per-node', '7'], env);
    expect(c.timeouts.commandMs).toBe(2000); // env over file
    expect(c.timeouts.connectMs).toBe(3000); // file over default
    expect(c.connectionsPerNode).toBe(7); // flag over env
    expect(c.logLevel).toBe('error'); // file
    expect(c.upstreams).toEqual([{ host: '10.0.0.9', port: 7000 }]);
    expect(c.clients.maxClients).toBe(DEFAULT_CONFIG.clients.maxClients); // default
    expect(run(['--config', file], {}).timeouts.commandMs).toBe(1000);
  });

  it('a bad value is an error naming the variable and the setting, with the file\'s message', () => {
    const msg = errorOf(['--upstream', '10.0.0.1:7000'], { RESPOOL_CONNECTIONS_PER_NODE: '0', RESPOOL_TIMEOUTS_COMMAND_MS: 'soon', RESPOOL_MODE: 'clustr' });
    expect(msg).toMatch(/environment variable RESPOOL_CONNECTIONS_PER_NODE \(connectionsPerNode\): must be an integer from 1 to 64/);
    expect(msg).toMatch(/environment variable RESPOOL_TIMEOUTS_COMMAND_MS \(timeouts\.commandMs\): must be a duration/);
    expect(msg).toMatch(/environment variable RESPOOL_MODE \(mode\): .*cluster/);
  });
});
