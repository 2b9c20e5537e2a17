import { resolve as resolvePath } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ADMIN_TOKEN_ENV, FLAGS, UPSTREAM_PASSWORD_ENV } from './flags.js';
import { convertHotKeyFlags } from './hot-keys-config.js';
import { convertTlsFlags } from './tls-config.js';
import { ACL_UPSTREAM_MODES, ConfigError, CROSS_SLOT_TRANSACTIONS, FLEET_STATE_MODES, LOG_LEVELS, MODES, READ_STRATEGIES, ZONE_FROM, type HostPort } from './types.js';
import { ValueProblem, show, suggest, toEnum, toHostPort, toMaxMemory, toWorkers } from './values.js';
import { convertListen, toSocketMode, toAdminAddress, readTokenFile, toAnnounced, toPeersFrom, toZone, toHttpUrl, toNumber, dedupe } from './setting-converters.js';

// The command line's flags (flags.ts lists them) → a flat map of settings ("limits.maxBulkLength"
// → bytes), every problem collected, each naming its flag. Merged by load-config.ts.

export type FlagValues = Record<string, string | boolean | Array<string | boolean> | undefined>;

const PARSE_OPTIONS: NonNullable<ParseArgsConfig['options']> = Object.fromEntries(
  FLAGS.map((f) => [f.name, { type: f.type, multiple: f.multiple ?? false, ...(f.short ? { short: f.short } : {}) }]),
);

export function parseFlags(argv: string[]): FlagValues {
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
export function convertFlags(values: FlagValues, env: NodeJS.ProcessEnv, problems: string[]): Map<string, unknown> {
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
  if (values.supervised === true) out.set('supervised', true);
  convert('max-memory', 'limits.maxMemory', (v) => toMaxMemory(v));
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
  convert('acl-upstream', 'acl.upstream', (v) => toEnum(v, ACL_UPSTREAM_MODES));
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

function nonEmpty(v: string): string {
  if (v === '') throw new ValueProblem('must not be empty');
  return v;
}
