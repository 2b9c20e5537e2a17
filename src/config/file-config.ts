import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { readHotKeysFile } from './hot-keys-config.js';
import { readTenantUpstreamTls, readTlsFile } from './tls-config.js';
import { BOOLEAN_SETTINGS, NUMERIC_FIELDS } from './schema.js';
import { aclRulesProblem, type UserConfig } from '../acl/users.js';
import { colocationProblem, type ColocationRule } from '../keys/colocation.js';
import type { UpstreamSetting } from '../acl/upstream-identity.js';
import { CONFIG_VALIDATOR_FILE } from '../own-files.js';
import { ACL_UPSTREAM_MODES, CROSS_SLOT_TRANSACTIONS, FLEET_STATE_MODES, LOG_LEVELS, MODES, NEAR_CACHE_CONFIRM, READ_STRATEGIES, SCRIPT_COMMAND_COUNTS, ZONE_FROM, type ReadStrategyName, type TenantConfig, type TenantUpstream } from './types.js';
import { ValueProblem, show, suggest, toEnum, toHostPort, toMaxMemory, toSize, toWorkers, type Range } from './values.js';
import { convertListen, toSocketMode, toAdminAddress, readTokenFile, readFirstLine, toAnnounced, toPeersFrom, toZone, toHttpUrl, toNumber, dedupe } from './setting-converters.js';

// The YAML config file (and the RESPOOL_<PATH> variables, env-config.ts, through the same schema
// and conversions) → a flat map of settings, every problem collected, each naming its field.
// Merged by load-config.ts.

// yaml and the schema's validator (ajv's code, generated ahead of time: config/schema-validator.ts)
// are required on first use, not imported: a respool configured by flags alone never needs them.
const require = createRequire(import.meta.url);

let validator: ValidateFunction | undefined;

function validateFile(data: unknown): ErrorObject[] {
  validator ??= require(fileURLToPath(CONFIG_VALIDATOR_FILE)) as ValidateFunction;
  return validator(data) ? [] : [...(validator.errors ?? [])];
}

/** Reads, parses, validates and converts a YAML config file into a settings map. */
export function readConfigFile(path: string, env: NodeJS.ProcessEnv, problems: string[]): Map<string, unknown> {
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
export function convertSettings(data: unknown, where: string, env: NodeJS.ProcessEnv, problems: string[], out = new Map<string, unknown>()): Map<string, unknown> {
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
  if (typeof settings.supervised === 'boolean') out.set('supervised', settings.supervised);
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
  const limits = settings.limits as Record<string, unknown> | undefined;
  if (limits !== undefined && limits !== null && typeof limits === 'object') {
    set('limits.maxMemory', convert('limits.maxMemory', limits.maxMemory, (v) => toMaxMemory(v)));
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
  for (const [group, names] of Object.entries(BOOLEAN_SETTINGS)) {
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

  // Tenants before users: a user takes its tenant's namespace (users[].keyPrefix).
  const tenants: TenantConfig[] = [];
  if (Array.isArray(settings.tenants) && !isBad('tenants')) {
    (settings.tenants as Array<Record<string, unknown>>).forEach((t, i) => {
      const tenant = convert(`tenants[${i}]`, t, () => readTenant(t, tenants, env));
      if (tenant) tenants.push(tenant);
    });
    out.set('tenants', tenants);
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
          ...(typeof u.keyPrefix === 'string' ? { keyPrefix: u.keyPrefix } : {}),
          ...(typeof u.tenant === 'string' ? tenantOfUser(u.tenant, u.keyPrefix, tenants) : {}),
        };
        const problem = aclRulesProblem(entry); // Valkey's ACL SETUSER error for a bad rule (src/acl/users.ts)
        if (problem !== null) throw new ValueProblem(problem);
        return entry;
      });
      if (user) users.push(user);
    });
    out.set('users', users);
  }

  const clients = settings.clients as Record<string, unknown> | undefined;
  if (clients !== undefined && clients !== null && typeof clients === 'object' && !isBad('clients')) {
    set('clients.scriptCommandCounts', convert('clients.scriptCommandCounts', clients.scriptCommandCounts, (v) => toEnum(v, SCRIPT_COMMAND_COUNTS)));
  }

  const nearCache = settings.nearCache as Record<string, unknown> | undefined;
  if (nearCache !== undefined && nearCache !== null && typeof nearCache === 'object' && !isBad('nearCache')) {
    if (Array.isArray(nearCache.keys)) out.set('nearCache.keys', nearCache.keys.map(String));
    set('nearCache.confirm', convert('nearCache.confirm', nearCache.confirm, (v) => toEnum(v, NEAR_CACHE_CONFIRM)));
  }

  const migration = settings.migration as Record<string, unknown> | undefined;
  if (migration !== undefined && migration !== null && typeof migration === 'object' && !isBad('migration')) {
    set('migration.stateFile', convert('migration.stateFile', migration.stateFile, (v) => resolvePath(v as string)));
    const auth = migration.upstreamAuth as Record<string, unknown> | null | undefined;
    if (auth === null) out.set('migration.upstreamAuth', null);
    else if (auth !== undefined) {
      set('migration.upstreamAuth', convert('migration.upstreamAuth', auth, (v) => readUpstreamAuth(v as Record<string, unknown>, env)));
    }
    if (migration.upstreamTls !== undefined) set('migration.upstreamTls', convert('migration.upstreamTls', migration.upstreamTls, (v) => readTenantUpstreamTls(v as Record<string, unknown> | null)));
  }

  if (Array.isArray(settings.colocate) && !isBad('colocate')) {
    const rules = (settings.colocate as ColocationRule[]).map((r) => ({ keys: r.keys, tag: r.tag }));
    const problem = colocationProblem(rules);
    if (problem !== null) problems.push(`${where}: ${problem}`);
    else out.set('colocate', rules);
  }

  const acl = settings.acl as Record<string, unknown> | undefined;
  if (acl !== undefined && acl !== null && typeof acl === 'object' && !isBad('acl')) {
    if (acl.file === null) out.set('acl.file', null);
    else set('acl.file', convert('acl.file', acl.file, (v) => resolvePath(v as string)));
    set('acl.upstream', convert('acl.upstream', acl.upstream, (v) => toEnum(v, ACL_UPSTREAM_MODES)));
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
  const secret = readFirstLine(file);
  if (secret === '') throw new ValueProblem(`${file} holds no secret on its first line`);
  return secret;
}

/** password, or passwordEnv naming an environment variable; at most one of them. */
/** An upstreamAuth mapping of a tenant's own upstreams or a migration's target: its username (or null) and password. */
function readUpstreamAuth(auth: Record<string, unknown>, env: NodeJS.ProcessEnv): { username: string | null; password: string } {
  const password = readPassword(auth, env);
  if (password === undefined) throw new ValueProblem('upstreamAuth needs password or passwordEnv');
  return { username: typeof auth.username === 'string' ? auth.username : null, password };
}

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

/** tenants[].limits.bytesPerSecond's range, at load and when changed at run time (tenants/limit-changes.ts). */
export const BYTES_PER_SECOND: Range = { min: 1, max: 1024 ** 4 };

/** One tenants[] entry, checked against the tenants before it (names, namespaces). */
function readTenant(t: Record<string, unknown>, before: readonly TenantConfig[], env: NodeJS.ProcessEnv): TenantConfig {
  const name = t.name as string;
  if (name === 'default') throw new ValueProblem('the name "default" is the tenant of users in no tenant (docs/tenants.md): give this one another name');
  const twin = before.findIndex((x) => x.name === name);
  if (twin >= 0) throw new ValueProblem(`tenant ${JSON.stringify(name)} is already defined in tenants[${twin}]`);
  const keyPrefix = typeof t.keyPrefix === 'string' ? t.keyPrefix : null;
  if (keyPrefix !== null) {
    // One namespace must not hold another's keys: "a:" would see every key of "a:b:".
    const other = before.find((x) => x.keyPrefix !== null && (x.keyPrefix.startsWith(keyPrefix) || keyPrefix.startsWith(x.keyPrefix)));
    if (other !== undefined) throw new ValueProblem(`keyPrefix ${JSON.stringify(keyPrefix)} overlaps tenant ${JSON.stringify(other.name)}'s ${JSON.stringify(other.keyPrefix)}: one namespace would hold the other's keys`);
  }
  const l = (t.limits ?? {}) as Record<string, unknown>;
  const limit = (v: unknown): number | null => (typeof v === 'number' ? v : null);
  // A size per second: 50mb, or a number of bytes.
  let bytesPerSecond: number | null = null;
  try {
    if (l.bytesPerSecond !== undefined) bytesPerSecond = toSize(l.bytesPerSecond, BYTES_PER_SECOND);
  } catch (e) {
    if (e instanceof ValueProblem) throw new ValueProblem(`limits.bytesPerSecond: ${e.message}`);
    throw e;
  }
  return {
    name,
    keyPrefix,
    upstream: readTenantUpstream(t, env),
    priority: typeof t.priority === 'number' ? t.priority : 0,
    limits: { opsPerSecond: limit(l.opsPerSecond), bytesPerSecond, maxClients: limit(l.maxClients), maxInflight: limit(l.maxInflight) },
  };
}

/** A tenant's own upstreams (tenants[].upstreams, mode, upstreamAuth, upstreamTls), or null: the main ones. */
function readTenantUpstream(t: Record<string, unknown>, env: NodeJS.ProcessEnv): TenantUpstream | null {
  if (t.upstreams === undefined) {
    const stray = ['mode', 'upstreamAuth', 'upstreamTls'].find((k) => t[k] !== undefined);
    if (stray !== undefined) throw new ValueProblem(`${stray} is for a tenant's own upstreams: give upstreams too`);
    return null;
  }
  const upstreams = (t.upstreams as unknown[]).map((u, i) => {
    try {
      return toHostPort(u, false);
    } catch (e) {
      throw e instanceof ValueProblem ? new ValueProblem(`upstreams[${i}]: ${e.message}`) : e;
    }
  });
  const auth = t.upstreamAuth as Record<string, unknown> | null | undefined;
  const upstreamAuth = auth === null || auth === undefined ? null : readUpstreamAuth(auth, env);
  return {
    upstreams,
    mode: t.mode === undefined ? 'auto' : toEnum(t.mode, MODES),
    upstreamAuth,
    upstreamTls: readTenantUpstreamTls(t.upstreamTls as Record<string, unknown> | null | undefined),
  };
}

/** users[].tenant, checked: a tenant of tenants[]; a namespace on the user or on its tenant, not both (the user directory gives it the tenant's). */
function tenantOfUser(name: string, ownPrefix: unknown, tenants: readonly TenantConfig[]): Pick<UserConfig, 'tenant'> {
  const tenant = tenants.find((t) => t.name === name);
  if (tenant === undefined) throw new ValueProblem(`tenant ${JSON.stringify(name)} is not one of tenants[] (${tenants.map((t) => t.name).join(', ') || 'none defined'})`);
  if (tenant.keyPrefix !== null && ownPrefix !== undefined) throw new ValueProblem(`give keyPrefix on the user or on its tenant ${JSON.stringify(name)}, not both`);
  return { tenant: name };
}
