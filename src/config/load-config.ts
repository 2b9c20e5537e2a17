// Command line + optional YAML file + defaults → RespoolConfig.
//
// Precedence: flags (and RESPOOL_UPSTREAM_PASSWORD) win over the file, the file wins over the
// defaults. Each source is turned into a flat map of settings ("limits.maxBulkLength" → bytes),
// every problem in it is collected, and all of them are reported together in one ConfigError,
// one line each, each naming its flag or field.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { DEFAULT_CONFIG } from './defaults.js';
import { ADMIN_TOKEN_ENV, FLAGS, UPSTREAM_PASSWORD_ENV } from './flags.js';
import { helpText } from './help-text.js';
import { envConfigData, nameEnvProblem } from './env-config.js';
import { convertHotKeyFlags, readHotKeysFile } from './hot-keys-config.js';
import { checkTls, convertTlsFlags, readTlsFile } from './tls-config.js';
import { NUMERIC_FIELDS, type NumericField } from './schema.js';
import { aclRulesProblem, type UserConfig } from '../acl/users.js';
import type { UpstreamSetting } from '../acl/upstream-identity.js';
import { readAclFile } from '../acl/acl-file.js';
import { CommandTable } from '../commands/command-table.js';
import { OBSERVABILITY_SWITCHES } from './observability-config.js';
import { CONFIG_VALIDATOR_FILE, RESPOOL_VERSION } from '../own-files.js';
import {
  ConfigError, CROSS_SLOT_TRANSACTIONS, FLEET_STATE_MODES, LOG_LEVELS, MODES, READ_STRATEGIES, ZONE_FROM, type HostPort, type PeersFrom, type ReadStrategyName, type RespoolConfig,
} from './types.js';
import {
  ValueProblem, formatDuration, formatHostPort, show, suggest,
  toDuration, toEnum, toHostPort, toInteger, toSize, toWorkers,
} from './values.js';

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

// ---- flags ------------------------------------------------------------------------------------

type FlagValues = Record<string, string | boolean | Array<string | boolean> | undefined>;

const PARSE_OPTIONS: NonNullable<ParseArgsConfig['options']> = Object.fromEntries(
  FLAGS.map((f) => [f.name, { type: f.type, multiple: f.multiple ?? false, ...(f.short ? { short: f.short } : {}) }]),
);

function parseFlags(argv: string[]): FlagValues {
  // --help and --version win over everything else on the line, even over mistakes in it.
  const loose = parseArgs({ args: argv, options: PARSE_OPTIONS, strict: false, tokens: true });
  for (const t of loose.tokens) {
    if (t.kind === 'option' && t.value === undefined && (t.name === 'help' || t.name === 'version')) {
      return { [t.name]: true };
    }
  }
  try {
    return parseArgs({ args: argv, options: PARSE_OPTIONS, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new ConfigError(explainFlagError(argv, err));
  }
}

/** parseArgs' strict errors, restated: which flag, and what would have been right. */
function explainFlagError(argv: string[], err: unknown): string {
  const { tokens } = parseArgs({ args: argv, options: PARSE_OPTIONS, strict: false, tokens: true });
  const byName = new Map(FLAGS.map((f) => [f.name, f]));
  const byShort = new Map(FLAGS.filter((f) => f.short).map((f) => [f.short!, f]));
  for (const t of tokens) {
    if (t.kind === 'positional') {
      return `unexpected argument ${JSON.stringify(t.value)} (respool takes only --options; see --help)`;
    }
    if (t.kind !== 'option') continue;
    const spec = t.rawName.startsWith('--') ? byName.get(t.name) : byShort.get(t.name);
    if (!spec) {
      const hint = t.rawName.startsWith('--') ? suggest(t.name, byName.keys()) : undefined;
      return `unknown option ${t.rawName}${hint ? ` (did you mean --${hint}?)` : ''}`;
    }
    if (spec.type === 'boolean' && t.value !== undefined) return `--${spec.name} does not take a value`;
    if (spec.type === 'string') {
      if (t.value === undefined) return `--${spec.name}: missing value (expected ${spec.value})`;
      if (!t.inlineValue && t.value.startsWith('-')) {
        return `--${spec.name}: missing value before ${t.value} (to pass a value that starts with "-", write --${spec.name}=${t.value})`;
      }
    }
  }
  return err instanceof Error ? err.message : String(err);
}

/** Flag strings → settings map, with the same keys as the file's map. */
function convertFlags(values: FlagValues, env: NodeJS.ProcessEnv, problems: string[]): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const str = (name: string) => values[name] as string | undefined;
  const convert = (name: string, key: string, fn: (v: string) => unknown) => {
    const v = str(name);
    if (v === undefined) return;
    try {
      out.set(key, fn(v));
    } catch (e) {
      if (!(e instanceof ValueProblem)) throw e;
      problems.push(`--${name}: ${e.message}`);
    }
  };

  convertListen(str('listen'), (key, value) => out.set(key, value), (problem) => problems.push(`--listen: ${problem}`));
  convert('unix-socket-mode', 'unixSocketMode', (v) => toSocketMode(v));
  const upstreamArgs = values.upstream as string[] | undefined;
  if (upstreamArgs !== undefined) {
    const upstreams: HostPort[] = [];
    for (const arg of upstreamArgs) {
      const pieces = arg.split(',').map((p) => p.trim()).filter((p) => p !== '');
      if (pieces.length === 0) problems.push(`--upstream: expected host:port (got ${show(arg)})`);
      for (const p of pieces) {
        try {
          upstreams.push(toHostPort(p, false));
        } catch (e) {
          if (!(e instanceof ValueProblem)) throw e;
          problems.push(`--upstream: ${e.message}`);
        }
      }
    }
    out.set('upstreams', upstreams);
  }
  convert('cluster-announce', 'cluster.announce', (v) => toAnnounced(v));
  const peerArgs = values['cluster-peer'] as string[] | undefined;
  if (peerArgs !== undefined) {
    const peers: HostPort[] = [];
    for (const arg of peerArgs) {
      const pieces = arg.split(',').map((p) => p.trim()).filter((p) => p !== '');
      if (pieces.length === 0) problems.push(`--cluster-peer: expected host:port (got ${show(arg)})`);
      for (const p of pieces) {
        try {
          peers.push(toAnnounced(p));
        } catch (e) {
          if (!(e instanceof ValueProblem)) throw e;
          problems.push(`--cluster-peer: ${e.message}`);
        }
      }
    }
    out.set('cluster.peers', dedupe(peers));
  }
  convert('cluster-peers-from', 'cluster.peersFrom', (v) => (v === 'off' || v === 'none' ? null : toPeersFrom(v)));
  convert('fleet-state', 'cluster.fleetState', (v) => toEnum(v, FLEET_STATE_MODES));
  convert('mode', 'mode', (v) => toEnum(v, MODES));
  convert('workers', 'workers', (v) => toWorkers(v));
  convert('admin', 'admin', (v) => (v === 'off' ? null : toAdminAddress(v)));
  convert('admin-token-file', 'adminToken', (v) => readTokenFile(v));
  if (values['admin-token-file'] === undefined) {
    const fromEnv = env[ADMIN_TOKEN_ENV];
    if (fromEnv) out.set('adminToken', fromEnv); // set but empty counts as unset
  }
  convert('log-level', 'logLevel', (v) => toEnum(v, LOG_LEVELS));
  convertHotKeyFlags(values, out, problems);
  convertTlsFlags(values, out, problems);
  convert('read-strategy', 'reads.strategy', (v) => toEnum(v, READ_STRATEGIES));
  convert('zone', 'reads.zone', (v) => toZone(v));
  convert('zone-from', 'reads.zoneFrom', (v) => toEnum(v, ZONE_FROM));
  convert('transactions-cross-slot', 'transactions.crossSlot', (v) => toEnum(v, CROSS_SLOT_TRANSACTIONS));
  convert('metadata-base-url', 'reads.metadataBaseUrl', (v) => toHttpUrl(v));
  convert('acl-file', 'acl.file', (v) => resolvePath(nonEmpty(v)));
  convert('acl-upstream', 'acl.upstream', (v) => toEnum(v, ['none', 'mirror'] as const));
  convert('upstream-user', 'upstreamAuth.username', (v) => nonEmpty(v));
  convert('upstream-password', 'upstreamAuth.password', (v) => nonEmpty(v));
  if (values['upstream-password'] === undefined) {
    const fromEnv = env[UPSTREAM_PASSWORD_ENV];
    if (fromEnv) out.set('upstreamAuth.password', fromEnv); // set but empty counts as unset
  }
  for (const f of FLAGS) {
    if (f.field) convert(f.name, f.field.path, (v) => toNumber(f.field!, v));
  }
  return out;
}

/**
 * listen: host:port, or unix:PATH — a Unix domain socket instead of a TCP listener (the path made
 * absolute: the socket is removed at shutdown from wherever respool runs).
 */
function convertListen(v: string | undefined, set: (key: string, value: unknown) => void, problem: (p: string) => void): void {
  if (v === undefined) return;
  try {
    if (v.startsWith('unix:')) {
      const path = v.slice(5);
      if (path === '') throw new ValueProblem('unix: needs a socket path (unix:/run/respool/respool.sock)');
      set('listen', null);
      set('unixSocket', resolvePath(path));
    } else {
      set('listen', toHostPort(v, true));
    }
  } catch (e) {
    if (!(e instanceof ValueProblem)) throw e;
    problem(e.message);
  }
}

/** Permission bits in octal ("660", "0666"). */
function toSocketMode(v: unknown): number {
  if (typeof v !== 'string' || !/^0?[0-7]{3}$/.test(v)) throw new ValueProblem(`must be permission bits in octal, like "660" (got ${show(v)})`);
  return parseInt(v, 8);
}

/** The admin server's address: host:port, or a bare port on loopback (127.0.0.1). */
function toAdminAddress(v: unknown): HostPort {
  if (typeof v === 'number' || (typeof v === 'string' && /^\d{1,5}$/.test(v.trim()))) return toHostPort(`127.0.0.1:${String(v).trim()}`, true);
  return toHostPort(v, true);
}

/** An admin token read from a file: its first line, trimmed; at least 16 characters. */
function readTokenFile(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ValueProblem(`cannot read ${file} (${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (e as Error).message})`);
  }
  const token = (text.split(/\r?\n/)[0] ?? '').trim();
  if (token.length < 16) throw new ValueProblem(`the token in ${file} must be at least 16 characters on its first line`);
  return token;
}

/** An address given to clients (cluster.announce, cluster.peers): a port, and a host one can connect to. */
function toAnnounced(v: unknown): HostPort {
  const hp = toHostPort(v, false);
  if (hp.host === '0.0.0.0' || hp.host === '::' || hp.host === '') {
    throw new ValueProblem(`must be an address clients can connect to, not a wildcard (got ${show(v)})`);
  }
  return hp;
}

/**
 * cluster.peersFrom: `dns:NAME:PORT` — every A/AAAA record of NAME is a fleet member announcing
 * itself at that address and PORT (a Kubernetes headless Service lists every pod).
 */
function toPeersFrom(v: unknown): PeersFrom {
  const m = typeof v === 'string' ? /^dns:([^\s:]+):(\d{1,5})$/.exec(v.trim()) : null;
  const port = m ? Number(m[2]) : NaN;
  if (m === null || port < 1 || port > 65535) {
    throw new ValueProblem(`must be dns:NAME:PORT, e.g. dns:respool-peers.default.svc.cluster.local:6380 (got ${show(v)})`);
  }
  return { kind: 'dns', name: m[1]!, port };
}

/** An availability zone name: non-empty, no whitespace (it becomes a metric label). */
function toZone(v: unknown): string {
  if (typeof v !== 'string' || !/^\S+$/.test(v)) throw new ValueProblem(`must be a zone name without spaces (got ${show(v)})`);
  return v;
}

/** An http:// or https:// base URL, without a trailing slash. */
function toHttpUrl(v: unknown): string {
  let url: URL | undefined;
  try {
    url = typeof v === 'string' ? new URL(v) : undefined;
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new ValueProblem(`must be an http:// or https:// URL (got ${show(v)})`);
  }
  return (v as string).replace(/\/+$/, '');
}

function nonEmpty(v: string): string {
  if (v === '') throw new ValueProblem('must not be empty');
  return v;
}

function toNumber(field: NumericField, v: unknown): number {
  switch (field.kind) {
    case 'integer': return toInteger(v, field);
    case 'size': return toSize(v, field);
    case 'duration': return toDuration(v, field);
  }
}

// ---- the config file --------------------------------------------------------------------------

// yaml and the schema's validator (ajv's code, generated ahead of time: config/schema-validator.ts)
// are required on first use, not imported: a respool configured by flags alone never needs them.
const require = createRequire(import.meta.url);

let validator: ValidateFunction | undefined;

function validateFile(data: unknown): ErrorObject[] {
  validator ??= require(fileURLToPath(CONFIG_VALIDATOR_FILE)) as ValidateFunction;
  return validator(data) ? [] : [...(validator.errors ?? [])];
}

/** Reads, parses, validates and converts a YAML config file into a settings map. */
function readConfigFile(path: string, env: NodeJS.ProcessEnv, problems: string[]): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const where = `config file ${path}`;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (e as Error).message;
    problems.push(`${where}: cannot read it (${why})`);
    return out;
  }

  const { parseDocument } = require('yaml') as typeof import('yaml');
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    for (const err of doc.errors) {
      const pos = err.linePos?.[0];
      const message = err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
      // An unquoted "[::1]:6379" is a YAML list followed by ":6379".
      const line = pos ? (text.split(/\r?\n/)[pos.line - 1] ?? '') : '';
      const hint = /\[[0-9A-Fa-f:.]*\]:\d/.test(line) ? ' (put IPv6 addresses in quotes: "[::1]:6379")' : '';
      problems.push(`${where}${pos ? `:${pos.line}:${pos.col}` : ''}: YAML syntax error: ${message}${hint}`);
    }
    return out;
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 1000 }) ?? {}; // an empty file sets nothing
  } catch (e) {
    problems.push(`${where}: YAML error: ${(e as Error).message}`);
    return out;
  }
  return convertSettings(data, where, env, problems, out);
}

/** Validates and converts parsed settings (the YAML file's, or the environment's: env-config.ts) into a settings map. */
function convertSettings(data: unknown, where: string, env: NodeJS.ProcessEnv, problems: string[], out = new Map<string, unknown>()): Map<string, unknown> {
  // Shape first (ajv), then conversion of every value the schema did not already complain about.
  const bad: string[] = []; // paths (and everything under them) already reported
  for (const err of validateFile(data)) {
    const problem = explainSchemaError(err);
    if (problem.path !== undefined) {
      if (bad.includes(problem.path)) continue; // one message per value
      bad.push(problem.path);
    }
    problems.push(`${where}: ${problem.message}`);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return out;
  const settings = data as Record<string, unknown>;
  // A value is skipped when the schema reported it, something above it, or something inside it.
  const isBad = (p: string) =>
    bad.some((b) => b === '' || b === p || p.startsWith(`${b}.`) || p.startsWith(`${b}[`)
      || b.startsWith(`${p}.`) || b.startsWith(`${p}[`));

  /** Converts one value, or records its problem; undefined when absent, reported or bad. */
  const convert = <T>(p: string, raw: unknown, fn: (v: unknown) => T): T | undefined => {
    if (raw === undefined || isBad(p)) return undefined;
    try {
      return fn(raw);
    } catch (e) {
      if (!(e instanceof ValueProblem)) throw e;
      problems.push(`${where}: ${p}: ${e.message}`);
      return undefined;
    }
  };
  const set = (key: string, value: unknown) => {
    if (value !== undefined) out.set(key, value);
  };

  if (settings.listen !== undefined && !isBad('listen')) convertListen(settings.listen as string, set, (problem) => problems.push(`${where}: listen: ${problem}`));
  if (settings.unixSocket === null) out.set('unixSocket', null);
  else set('unixSocket', convert('unixSocket', settings.unixSocket, (v) => resolvePath(v as string)));
  set('unixSocketMode', convert('unixSocketMode', settings.unixSocketMode, (v) => toSocketMode(v)));
  if (Array.isArray(settings.upstreams) && !isBad('upstreams')) {
    const upstreams = settings.upstreams.map((u, i) => convert(`upstreams[${i}]`, u, (v) => toHostPort(v, false)));
    set('upstreams', upstreams.filter((u) => u !== undefined));
  }
  set('mode', convert('mode', settings.mode, (v) => toEnum(v, MODES)));
  set('workers', convert('workers', settings.workers, (v) => toWorkers(v)));
  // admin: null (or "off") is a value here — it turns off an admin server — so it is stored as null.
  // A mapping { address, token, tokenFile } also sets the token for admin mutations.
  const adminSetting = settings.admin;
  const adminAddress = adminSetting !== null && typeof adminSetting === 'object' && !Array.isArray(adminSetting)
    ? (adminSetting as Record<string, unknown>).address : adminSetting;
  if (adminAddress === null || adminAddress === 'off') out.set('admin', null);
  else set('admin', convert(typeof adminSetting === 'object' ? 'admin.address' : 'admin', adminAddress, (v) => toAdminAddress(v)));
  if (adminSetting !== null && typeof adminSetting === 'object' && !isBad('admin')) {
    const { token, tokenFile, readToken, readTokenFile: readFile } = adminSetting as Record<string, unknown>;
    if (token !== undefined && tokenFile !== undefined) problems.push(`${where}: admin: give token or tokenFile, not both`);
    else if (typeof token === 'string') out.set('adminToken', token);
    else if (typeof tokenFile === 'string') set('adminToken', convert('admin.tokenFile', tokenFile, (v) => readTokenFile(v as string)));
    if (readToken !== undefined && readFile !== undefined) problems.push(`${where}: admin: give readToken or readTokenFile, not both`);
    else if (typeof readToken === 'string') out.set('adminReadToken', readToken);
    else if (typeof readFile === 'string') set('adminReadToken', convert('admin.readTokenFile', readFile, (v) => readTokenFile(v as string)));
  }
  set('logLevel', convert('logLevel', settings.logLevel, (v) => toEnum(v, LOG_LEVELS)));
  const reads = settings.reads as Record<string, unknown> | undefined;
  if (reads !== undefined && reads !== null && typeof reads === 'object') {
    set('reads.strategy', convert('reads.strategy', reads.strategy, (v) => toEnum(v, READ_STRATEGIES)));
    if (reads.zone === null) out.set('reads.zone', null);
    else set('reads.zone', convert('reads.zone', reads.zone, (v) => toZone(v)));
    set('reads.zoneFrom', convert('reads.zoneFrom', reads.zoneFrom, (v) => toEnum(v, ZONE_FROM)));
    if (reads.metadataBaseUrl === null) out.set('reads.metadataBaseUrl', null);
    else set('reads.metadataBaseUrl', convert('reads.metadataBaseUrl', reads.metadataBaseUrl, (v) => toHttpUrl(v)));
    if (Array.isArray(reads.prefixes) && !isBad('reads.prefixes')) {
      const prefixes: Array<{ prefix: string; strategy: ReadStrategyName }> = [];
      (reads.prefixes as Array<Record<string, unknown>>).forEach((entry, i) => {
        const item = convert(`reads.prefixes[${i}]`, entry, () => {
          const prefix = entry.prefix as string;
          const twin = prefixes.findIndex((x) => x.prefix === prefix);
          if (twin >= 0) throw new ValueProblem(`prefix ${JSON.stringify(prefix)} is already listed in reads.prefixes[${twin}]`);
          return { prefix, strategy: toEnum(entry.strategy, READ_STRATEGIES) };
        });
        if (item) prefixes.push(item);
      });
      out.set('reads.prefixes', prefixes);
    }
  }
  const transactions = settings.transactions as Record<string, unknown> | undefined;
  if (transactions !== undefined && transactions !== null && typeof transactions === 'object') {
    set('transactions.crossSlot', convert('transactions.crossSlot', transactions.crossSlot, (v) => toEnum(v, CROSS_SLOT_TRANSACTIONS)));
  }
  const cluster = settings.cluster as Record<string, unknown> | undefined;
  if (cluster !== undefined && cluster !== null && typeof cluster === 'object') {
    if (cluster.announce === null) out.set('cluster.announce', null);
    else set('cluster.announce', convert('cluster.announce', cluster.announce, (v) => toAnnounced(v)));
    if (Array.isArray(cluster.peers) && !isBad('cluster.peers')) {
      const peers = cluster.peers.map((p, i) => convert(`cluster.peers[${i}]`, p, (v) => toAnnounced(v)));
      out.set('cluster.peers', dedupe(peers.filter((p) => p !== undefined)));
    }
    if (cluster.peersFrom === null) out.set('cluster.peersFrom', null);
    else set('cluster.peersFrom', convert('cluster.peersFrom', cluster.peersFrom, (v) => toPeersFrom(v)));
    set('cluster.fleetState', convert('cluster.fleetState', cluster.fleetState, (v) => toEnum(v, FLEET_STATE_MODES)));
  }
  if (!isBad('hotKeys')) readHotKeysFile(settings.hotKeys, convert, set);
  for (const [group, names] of Object.entries(OBSERVABILITY_SWITCHES)) {
    const g = settings[group] as Record<string, unknown> | undefined;
    if (g === undefined || g === null || typeof g !== 'object') continue;
    for (const name of names) set(`${group}.${name}`, convert(`${group}.${name}`, g[name], (v) => v as boolean));
  }
  readTlsFile(settings, convert, out);
  for (const f of NUMERIC_FIELDS) {
    const [group, key] = f.path.split('.') as [string, string | undefined];
    const raw = key === undefined ? settings[group] : (settings[group] as Record<string, unknown> | undefined)?.[key];
    set(f.path, convert(f.path, raw, (v) => toNumber(f, v)));
  }

  const auth = settings.upstreamAuth as Record<string, unknown> | null | undefined;
  if (auth === null) {
    out.set('upstreamAuth', null);
  } else if (auth !== undefined && !isBad('upstreamAuth')) {
    // Without password or passwordEnv the password may come from the flag or the environment;
    // assemble() reports a user name left without one.
    set('upstreamAuth.username', auth.username);
    set('upstreamAuth.password', convert('upstreamAuth', auth, (v) => readPassword(v as Record<string, unknown>, env)));
  }

  if (Array.isArray(settings.users) && !isBad('users')) {
    const users: UserConfig[] = [];
    (settings.users as Array<Record<string, unknown>>).forEach((u, i) => {
      const user = convert(`users[${i}]`, u, (v) => {
        const name = u.name as string;
        const twin = users.findIndex((x) => x.name === name);
        if (twin >= 0) throw new ValueProblem(`user ${JSON.stringify(name)} is already defined in users[${twin}]`);
        const password = readPassword(v as Record<string, unknown>, env);
        const rules = u.rules as string | undefined;
        if (password === undefined && rules === undefined) throw new ValueProblem('needs rules, password or passwordEnv');
        const upstream = readUserUpstream(u.upstream, env);
        const entry: UserConfig = {
          name,
          ...(password !== undefined ? { password } : {}),
          ...(rules !== undefined ? { rules } : {}),
          ...(upstream !== undefined ? { upstream } : {}),
        };
        const problem = aclRulesProblem(entry); // Valkey's ACL SETUSER error for a bad rule (src/acl/users.ts)
        if (problem !== null) throw new ValueProblem(problem);
        return entry;
      });
      if (user) users.push(user);
    });
    out.set('users', users);
  }

  const acl = settings.acl as Record<string, unknown> | undefined;
  if (acl !== undefined && acl !== null && typeof acl === 'object' && !isBad('acl')) {
    if (acl.file === null) out.set('acl.file', null);
    else set('acl.file', convert('acl.file', acl.file, (v) => resolvePath(v as string)));
    set('acl.upstream', convert('acl.upstream', acl.upstream, (v) => toEnum(v, ['none', 'mirror'] as const)));
    set('acl.mirrorPrefix', acl.mirrorPrefix);
    if (acl.mirrorSecret !== undefined && acl.mirrorSecretEnv !== undefined) problems.push(`${where}: acl: give mirrorSecret or mirrorSecretEnv, not both`);
    else if (typeof acl.mirrorSecret === 'string') out.set('acl.mirrorSecret', acl.mirrorSecret);
    else if (typeof acl.mirrorSecretEnv === 'string') {
      set('acl.mirrorSecret', convert('acl.mirrorSecretEnv', acl.mirrorSecretEnv, (v) => readPassword({ passwordEnv: v }, env)));
    }
  }
  return out;
}

/** users[].upstream: mirror, none, or { username, password | passwordEnv | passwordFile } (a mapped identity). */
function readUserUpstream(raw: unknown, env: NodeJS.ProcessEnv): UpstreamSetting | undefined {
  if (raw === undefined) return undefined;
  if (raw === 'mirror' || raw === 'none') return raw;
  const holder = raw as Record<string, unknown>;
  const { passwordFile } = holder;
  const given = [holder.password, holder.passwordEnv, passwordFile].filter((x) => x !== undefined).length;
  if (given !== 1) throw new ValueProblem('upstream: give exactly one of password, passwordEnv, passwordFile');
  const password = typeof passwordFile === 'string' ? readSecretFile(passwordFile) : readPassword(holder, env)!;
  return { username: holder.username as string, password };
}

/** A secret read from a file: its first line, trimmed, not empty. */
function readSecretFile(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ValueProblem(`cannot read ${file} (${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (e as Error).message})`);
  }
  const secret = (text.split(/\r?\n/)[0] ?? '').trim();
  if (secret === '') throw new ValueProblem(`${file} holds no secret on its first line`);
  return secret;
}

/** password, or passwordEnv naming an environment variable; at most one of them. */
function readPassword(holder: Record<string, unknown>, env: NodeJS.ProcessEnv): string | undefined {
  const { password, passwordEnv } = holder;
  if (password !== undefined && passwordEnv !== undefined) {
    throw new ValueProblem('give password or passwordEnv, not both');
  }
  if (typeof password === 'string') return password;
  if (typeof passwordEnv === 'string') {
    const value = env[passwordEnv];
    if (!value) throw new ValueProblem(`passwordEnv: environment variable ${passwordEnv} is ${value === '' ? 'empty' : 'not set'}`);
    return value;
  }
  return undefined;
}

/**
 * One ajv error → its message, starting with the field's path as written in YAML
 * ("limits.maxBulkLength", "upstreams[1]"), and the path of the value it condemns (undefined when
 * it condemns no value: an unknown key says nothing about its siblings).
 */
function explainSchemaError(err: ErrorObject): { path: string | undefined; message: string } {
  const path = err.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, seg) => (/^\d+$/.test(seg) ? `${acc}[${seg}]` : acc ? `${acc}.${seg}` : seg), '');
  const prefix = path === '' ? '' : `${path}: `;
  const parent = (err.parentSchema ?? {}) as Record<string, unknown>;
  switch (err.keyword) {
    case 'additionalProperties': {
      const key = String((err.params as { additionalProperty: string }).additionalProperty);
      // A nested setting written at top level ("maxBulkLength:") points to where it belongs.
      const hint =
        suggest(key, Object.keys((parent.properties ?? {}) as object)) ?? (path === '' ? suggestNested(key) : undefined);
      const at = path === '' ? 'at top level' : `in ${path}`;
      const message = `unknown field ${JSON.stringify(key)} ${at}${hint ? ` (did you mean ${JSON.stringify(hint)}?)` : ''}`;
      return { path: undefined, message };
    }
    case 'required': {
      const missing = String((err.params as { missingProperty: string }).missingProperty);
      return { path, message: `${prefix}missing field ${JSON.stringify(missing)}` };
    }
    case 'enum':
      try {
        toEnum(err.data, (err.params as { allowedValues: string[] }).allowedValues);
      } catch (e) {
        if (e instanceof ValueProblem) return { path, message: `${prefix}${e.message}` };
      }
      break;
  }
  const expect = typeof parent['x-expect'] === 'string' ? parent['x-expect'] : (err.message ?? 'is invalid');
  return { path, message: `${prefix}${expect} (got ${show(err.data)})` };
}

/** "maxBulkLength" → "limits.maxBulkLength": the nested setting a top-level key was meant to be. */
function suggestNested(key: string): string | undefined {
  const byLeaf = new Map(
    NUMERIC_FIELDS.filter((f) => f.path.includes('.')).map((f) => [f.path.slice(f.path.indexOf('.') + 1), f.path]),
  );
  const leaf = suggest(key, byLeaf.keys());
  return leaf === undefined ? undefined : byLeaf.get(leaf);
}

/** Settings from RESPOOL_<PATH> variables, through the file's schema and conversions; problems name the variable. */
function readEnvironment(env: NodeJS.ProcessEnv, problems: string[]): Map<string, unknown> {
  const { data, names } = envConfigData(env);
  if (names.size === 0) return new Map();
  const own: string[] = [];
  const out = convertSettings(data, 'environment', env, own);
  for (const p of own) problems.push(nameEnvProblem(p, names));
  return out;
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

function dedupe(list: HostPort[]): HostPort[] {
  const seen = new Set<string>();
  return list.filter((hp) => {
    const k = formatHostPort(hp);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
