// TLS settings: the client-side listener (`listenTls`, `tls`) and respool's own connections to
// the upstream nodes (`upstreamTls`). Their schema, flags and checks live here so that the
// shared config files only list them (like hot-keys-config.ts).
//
//   listenTls: 0.0.0.0:6390          # --listen-tls; next to the plaintext `listen`
//   tls: { cert, key, ca, requireClientCert, minVersion, ciphers }
//   upstreamTls: { enabled, ca, cert, key, servername, rejectUnauthorized }
//
// Files are checked when the config is read (a missing file is exit 2 naming the field), and
// tried together (certificate matches key, CA parses) before respool starts.

import { accessSync, constants } from 'node:fs';
import { secureContextFor } from '../util/tls-files.js';
import type { FlagSpec } from './flags.js';
import { ValueProblem, show, toEnum, toHostPort } from './values.js';

export type TlsVersion = 'TLSv1.2' | 'TLSv1.3';
export const TLS_VERSIONS: readonly TlsVersion[] = ['TLSv1.2', 'TLSv1.3'];

/** The client-side TLS listener's certificate and policy (used when listenTls is set). */
export interface ClientTlsConfig {
  cert: string | null; // PEM file: respool's certificate (chain)
  key: string | null; // PEM file: its private key
  ca: string | null; // PEM file: CAs that sign client certificates (mTLS)
  requireClientCert: boolean; // default false; true needs ca
  minVersion: TlsVersion; // default TLSv1.2
  ciphers: string | null; // OpenSSL cipher list (TLS 1.2); null = Node's default
}

/** respool → Valkey: every upstream connection uses TLS when enabled. */
export interface UpstreamTlsConfig {
  enabled: boolean; // default false; any other upstreamTls setting turns it on
  ca: string | null; // PEM file: CAs for the nodes' certificates; null = the system's
  cert: string | null; // PEM file: client certificate (tls-auth-clients yes)
  key: string | null;
  servername: string | null; // SNI and the name checked in the certificate; null = the node's host
  rejectUnauthorized: boolean; // default true
}

export const DEFAULT_CLIENT_TLS: ClientTlsConfig = {
  cert: null, key: null, ca: null, requireClientCert: false, minVersion: 'TLSv1.2', ciphers: null,
};
export const DEFAULT_UPSTREAM_TLS: UpstreamTlsConfig = {
  enabled: false, ca: null, cert: null, key: null, servername: null, rejectUnauthorized: true,
};

// ---- schema -----------------------------------------------------------------------------------

type Schema = Record<string, unknown>;
const file: Schema = { type: ['string', 'null'], minLength: 1, 'x-expect': 'must be a file path, or null' };
const bool: Schema = { type: 'boolean', 'x-expect': 'must be true or false' };

export const LISTEN_TLS_SCHEMA: Schema = { type: ['string', 'null'], 'x-expect': 'expected host:port or null' };
export const TLS_SCHEMA: Schema = {
  type: 'object',
  additionalProperties: false,
  'x-expect': 'must be a mapping',
  properties: {
    cert: file,
    key: file,
    ca: file,
    requireClientCert: bool,
    minVersion: { enum: [...TLS_VERSIONS], 'x-expect': `must be one of ${TLS_VERSIONS.join(', ')}` },
    ciphers: { type: ['string', 'null'], minLength: 1, 'x-expect': 'must be an OpenSSL cipher list, or null' },
  },
};
export const UPSTREAM_TLS_SCHEMA: Schema = {
  type: 'object',
  additionalProperties: false,
  'x-expect': 'must be a mapping',
  properties: {
    enabled: bool,
    ca: file,
    cert: file,
    key: file,
    servername: { type: ['string', 'null'], minLength: 1, 'x-expect': 'must be a host name, or null' },
    rejectUnauthorized: bool,
  },
};

// ---- flags ------------------------------------------------------------------------------------

export const TLS_FLAGS: readonly FlagSpec[] = [
  {
    name: 'listen-tls', type: 'string', value: 'host:port',
    help: 'a TLS listener for clients, next to the plaintext --listen; needs --tls-cert and --tls-key', default: 'off',
  },
  { name: 'tls-cert', type: 'string', value: 'FILE', help: 'PEM certificate (chain) of the TLS listener; reloaded on SIGHUP' },
  { name: 'tls-key', type: 'string', value: 'FILE', help: 'PEM private key of the TLS listener; reloaded on SIGHUP' },
  { name: 'tls-ca', type: 'string', value: 'FILE', help: 'PEM CA certificates that sign client certificates (mTLS)' },
  {
    name: 'tls-require-client-cert', type: 'string', value: 'on|off',
    help: 'refuse TLS clients without a certificate signed by --tls-ca', default: 'off',
  },
  {
    name: 'tls-min-version', type: 'string', value: TLS_VERSIONS.join('|'),
    help: 'lowest TLS version the listener accepts', default: DEFAULT_CLIENT_TLS.minVersion,
  },
  { name: 'tls-ciphers', type: 'string', value: 'LIST', help: 'OpenSSL cipher list of the listener (TLS 1.2)', default: 'Node\'s default' },
  {
    name: 'upstream-tls', type: 'string', value: 'on|off',
    help: 'connect to the upstream nodes over TLS (their TLS ports in a cluster); any --upstream-tls-* flag turns it on', default: 'off',
  },
  { name: 'upstream-tls-ca', type: 'string', value: 'FILE', help: 'PEM CA certificates for the upstream nodes\' certificates', default: 'the system\'s CAs' },
  { name: 'upstream-tls-cert', type: 'string', value: 'FILE', help: 'PEM client certificate for the upstream nodes (tls-auth-clients)' },
  { name: 'upstream-tls-key', type: 'string', value: 'FILE', help: 'PEM private key of --upstream-tls-cert' },
  {
    name: 'upstream-tls-servername', type: 'string', value: 'NAME',
    help: 'SNI name sent to the upstream nodes and checked in their certificates', default: 'the node\'s host',
  },
  {
    name: 'upstream-tls-reject-unauthorized', type: 'string', value: 'on|off',
    help: 'refuse upstream nodes whose certificate does not verify', default: 'on',
  },
];

/** A file respool can read (checked at start, so a typo is exit 2, not a failed handshake later). */
function toReadableFile(v: unknown): string {
  if (typeof v !== 'string' || v === '') throw new ValueProblem(`must be a file path (got ${show(v)})`);
  try {
    accessSync(v, constants.R_OK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (e as Error).message;
    throw new ValueProblem(`cannot read ${JSON.stringify(v)} (${why})`);
  }
  return v;
}

const onOff = (v: unknown) => toEnum(v, ['on', 'off']) === 'on';

/** The TLS flags → settings map entries (same keys as the file's). */
export function convertTlsFlags(
  values: Record<string, unknown>,
  out: Map<string, unknown>,
  problems: string[],
): void {
  const attempt = (name: string, key: string, fn: (v: string) => unknown) => {
    const v = values[name];
    if (typeof v !== 'string') return;
    try {
      out.set(key, fn(v));
    } catch (e) {
      if (!(e instanceof ValueProblem)) throw e;
      problems.push(`--${name}: ${e.message}`);
    }
  };
  attempt('listen-tls', 'listenTls', (v) => (v === 'off' ? null : toHostPort(v, true)));
  attempt('tls-cert', 'tls.cert', toReadableFile);
  attempt('tls-key', 'tls.key', toReadableFile);
  attempt('tls-ca', 'tls.ca', toReadableFile);
  attempt('tls-require-client-cert', 'tls.requireClientCert', onOff);
  attempt('tls-min-version', 'tls.minVersion', (v) => toEnum(v, TLS_VERSIONS));
  attempt('tls-ciphers', 'tls.ciphers', (v) => v);
  attempt('upstream-tls', 'upstreamTls.enabled', onOff);
  attempt('upstream-tls-ca', 'upstreamTls.ca', toReadableFile);
  attempt('upstream-tls-cert', 'upstreamTls.cert', toReadableFile);
  attempt('upstream-tls-key', 'upstreamTls.key', toReadableFile);
  attempt('upstream-tls-servername', 'upstreamTls.servername', (v) => v);
  attempt('upstream-tls-reject-unauthorized', 'upstreamTls.rejectUnauthorized', onOff);
}

/** The config file's listenTls, tls and upstreamTls → settings map entries. */
export function readTlsFile(
  settings: Record<string, unknown>,
  convert: <T>(path: string, raw: unknown, fn: (v: unknown) => T) => T | undefined,
  out: Map<string, unknown>,
): void {
  const set = (key: string, value: unknown) => {
    if (value !== undefined) out.set(key, value);
  };
  if (settings.listenTls === null || settings.listenTls === 'off') out.set('listenTls', null);
  else set('listenTls', convert('listenTls', settings.listenTls, (v) => toHostPort(v, true)));
  const groups: Array<[string, Record<string, (v: unknown) => unknown>]> = [
    ['tls', {
      cert: toReadableFile, key: toReadableFile, ca: toReadableFile,
      requireClientCert: (v) => v, minVersion: (v) => toEnum(v, TLS_VERSIONS), ciphers: (v) => v,
    }],
    ['upstreamTls', {
      enabled: (v) => v, ca: toReadableFile, cert: toReadableFile, key: toReadableFile,
      servername: (v) => v, rejectUnauthorized: (v) => v,
    }],
  ];
  for (const [group, fields] of groups) {
    const g = settings[group] as Record<string, unknown> | undefined | null;
    if (g === undefined || g === null || typeof g !== 'object') continue;
    for (const [field, fn] of Object.entries(fields)) {
      if (g[field] === null) out.set(`${group}.${field}`, null);
      else set(`${group}.${field}`, convert(`${group}.${field}`, g[field], fn));
    }
  }
}

/**
 * A tenant's upstreamTls mapping (tenants[].upstreamTls) → its settings, checked as the main
 * upstreamTls is: files readable, cert with key, any setting but `enabled: false` turns it on,
 * and the files usable together.
 */
export function readTenantUpstreamTls(raw: Record<string, unknown> | null | undefined): UpstreamTlsConfig {
  if (raw === null || raw === undefined) return { ...DEFAULT_UPSTREAM_TLS };
  const file = (field: string) => (raw[field] === undefined || raw[field] === null ? null : toReadableFile(raw[field]));
  const tls: UpstreamTlsConfig = {
    enabled: typeof raw.enabled === 'boolean' ? raw.enabled : Object.entries(raw).some(([, v]) => v !== null),
    ca: file('ca'),
    cert: file('cert'),
    key: file('key'),
    servername: typeof raw.servername === 'string' ? raw.servername : null,
    rejectUnauthorized: raw.rejectUnauthorized !== false,
  };
  if ((tls.cert === null) !== (tls.key === null)) throw new ValueProblem('upstreamTls.cert and upstreamTls.key go together');
  if (tls.enabled) {
    try {
      secureContextFor(tls);
    } catch (e) {
      throw new ValueProblem(`upstreamTls.ca / cert / key: not usable (${(e as Error).message})`);
    }
  }
  return tls;
}

/** Checks that need every TLS setting together (after merging); problems name the fields. */
export function checkTls(
  config: { listenTls: unknown; tls: ClientTlsConfig; upstreamTls: UpstreamTlsConfig },
  settings: Map<string, unknown>,
  problems: string[],
): void {
  const before = problems.length;
  const { tls, upstreamTls } = config;
  if (config.listenTls !== null) {
    if (tls.cert === null) problems.push('config: listenTls (--listen-tls) needs tls.cert (--tls-cert)');
    if (tls.key === null) problems.push('config: listenTls (--listen-tls) needs tls.key (--tls-key)');
  } else if (tls.cert !== null || tls.key !== null) {
    problems.push('config: tls.cert and tls.key are for the TLS listener: set listenTls (--listen-tls) too');
  }
  if (tls.requireClientCert && tls.ca === null) {
    problems.push('config: tls.requireClientCert (--tls-require-client-cert) needs tls.ca (--tls-ca), the CA of the client certificates');
  }
  // Any upstreamTls setting but `enabled` turns it on, unless enabled is given as false.
  if (settings.get('upstreamTls.enabled') === undefined
    && [...settings.keys()].some((k) => k.startsWith('upstreamTls.') && settings.get(k) !== null)) {
    upstreamTls.enabled = true;
  }
  if ((upstreamTls.cert === null) !== (upstreamTls.key === null)) {
    problems.push('config: upstreamTls.cert (--upstream-tls-cert) and upstreamTls.key (--upstream-tls-key) go together');
  }
  if (problems.length > before) return;
  // Parse the files now: a certificate that does not match its key is exit 2, not a failed start.
  if (config.listenTls !== null) {
    try {
      secureContextFor(tls);
    } catch (e) {
      problems.push(`config: tls.cert / tls.key / tls.ca: not usable (${(e as Error).message})`);
    }
  }
  if (upstreamTls.enabled) {
    try {
      secureContextFor(upstreamTls);
    } catch (e) {
      problems.push(`config: upstreamTls.ca / cert / key: not usable (${(e as Error).message})`);
    }
  }
}
