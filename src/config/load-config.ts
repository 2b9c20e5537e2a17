// Command line + environment + optional YAML file + defaults → RespoolConfig: each source read by
// its own file (flag-config.ts, env-config.ts, file-config.ts) into a flat map of settings
// ("limits.maxBulkLength" → bytes) with every problem in it collected; here they are merged.
//
// Precedence: flags > environment (RESPOOL_<PATH>; RESPOOL_UPSTREAM_PASSWORD and
// RESPOOL_ADMIN_TOKEN as their flags) > the file > the defaults. Every problem of every source is
// reported together in one ConfigError, one line each, each naming its flag, variable or field.

import { resolve as resolvePath } from 'node:path';
import { DEFAULT_CONFIG } from './defaults.js';
import { UPSTREAM_PASSWORD_ENV } from './flags.js';
import { helpText } from './help-text.js';
import { checkTls } from './tls-config.js';
import { readAclFile } from '../acl/acl-file.js';
import { CommandTable } from '../commands/command-table.js';
import { RESPOOL_VERSION } from '../own-files.js';
import { ConfigError, type RespoolConfig } from './types.js';
import { formatDuration, formatHostPort } from './values.js';
import { convertFlags, parseFlags } from './flag-config.js';
import { readConfigFile } from './file-config.js';
import { readEnvironment } from './env-config.js';
import { dedupe } from './setting-converters.js';

export { ConfigError } from './types.js';
export type { HostPort, LogLevel, Mode, RespoolConfig } from './types.js';

export type CommandLineResult =
  | { kind: 'help'; text: string }
  | { kind: 'version'; text: string }
  | { kind: 'run'; config: RespoolConfig; configFile?: string };

/**
 * Parses respool's command line (without the node and script arguments) into what to do.
 * Throws ConfigError for a bad flag, a bad config file, or a missing upstream.
 */
export function parseCommandLine(argv: string[], env: NodeJS.ProcessEnv = process.env): CommandLineResult {
  const values = parseFlags(argv);
  if (values.help) return { kind: 'help', text: helpText() };
  if (values.version) return { kind: 'version', text: `respool ${RESPOOL_VERSION}` };

  const problems: string[] = [];
  const configPath = values.config as string | undefined;
  const fromFile = configPath === undefined ? new Map<string, unknown>() : readConfigFile(configPath, env, problems);
  const fromEnv = readEnvironment(env, problems); // RESPOOL_<PATH> variables: env-config.ts
  const fromFlags = convertFlags(values, env, problems);
  if (problems.length > 0) throw new ConfigError(problems.join('\n'), problems);

  const config = assemble(new Map([...fromFile, ...fromEnv]), fromFlags, problems);
  if (problems.length > 0) throw new ConfigError(problems.join('\n'), problems);
  return configPath === undefined ? { kind: 'run', config } : { kind: 'run', config, configFile: resolvePath(configPath) };
}

// ---- merging ----------------------------------------------------------------------------------

/** defaults ← file ← flags, then the checks that need the whole picture. */
function assemble(fromFile: Map<string, unknown>, fromFlags: Map<string, unknown>, problems: string[]): RespoolConfig {
  const config = structuredClone(DEFAULT_CONFIG) as RespoolConfig;
  const settings = new Map([...fromFile, ...fromFlags]);
  const target = config as unknown as Record<string, Record<string, unknown>>;
  for (const [key, value] of settings) {
    if (key.startsWith('upstreamAuth')) continue;
    const [group, field, leaf] = key.split('.') as [string, string | undefined, string | undefined];
    if (field === undefined) (target as Record<string, unknown>)[group] = value;
    else if (leaf !== undefined) (target[group]![field] as Record<string, unknown>)[leaf] = value; // hotKeys.detection.x
    else target[group]![field] = value;
  }

  // upstreamAuth: username and password may come from different places (file user, env password).
  const username = (settings.get('upstreamAuth.username') as string | null | undefined) ?? null;
  const password = settings.get('upstreamAuth.password') as string | undefined;
  if (password !== undefined) {
    config.upstreamAuth = { username, password };
  } else if (username !== null) {
    problems.push(
      `upstream user ${JSON.stringify(username)} needs a password: --upstream-password, `
        + `${UPSTREAM_PASSWORD_ENV}, or upstreamAuth.password in the config file`,
    );
  }

  if (config.reads.zoneFrom !== 'off' && config.reads.metadataBaseUrl === null) {
    problems.push(
      `config: reads.zoneFrom ${config.reads.zoneFrom} needs reads.metadataBaseUrl (--metadata-base-url), `
        + `the address of the instance metadata service; respool has no built-in one`,
    );
  }
  checkTls(config, settings, problems);
  if (config.acl.file !== null) {
    // The file must load at start, as Valkey refuses to start with a bad aclfile.
    const read = readAclFile(config.acl.file, CommandTable.builtin(), new Set(config.users.map((u) => u.name)));
    if ('error' in read) problems.push(`config: acl.file: ${read.error}`);
  }
  if (config.upstreams.length === 0) {
    problems.push('--upstream (or upstreams: in the config file) is required');
  }
  config.upstreams = dedupe(config.upstreams);
  const { admin, listen } = config;
  if (listen === null && config.unixSocket === null) problems.push('config: listen is off and there is no unixSocket: clients could not connect');
  if (admin && listen && admin.port !== 0 && admin.port === listen.port && admin.host === listen.host) {
    problems.push(`config: admin and listen must be different addresses (both ${formatHostPort(listen)})`);
  }
  const { backoffBaseMs, backoffCapMs } = config.resilience;
  if (backoffBaseMs > backoffCapMs) {
    problems.push(
      `config: resilience.backoffBaseMs (${formatDuration(backoffBaseMs)}) must not exceed `
        + `resilience.backoffCapMs (${formatDuration(backoffCapMs)})`,
    );
  }
  const { retryBaseMs, retryMaxMs } = config.cluster;
  if (retryBaseMs > retryMaxMs) {
    problems.push(
      `config: cluster.retryBaseMs (${formatDuration(retryBaseMs)}) must not exceed `
        + `cluster.retryMaxMs (${formatDuration(retryMaxMs)})`,
    );
  }
  return config;
}
