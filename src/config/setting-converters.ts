import { readFileSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import type { NumericField } from './schema.js';
import type { HostPort, PeersFrom } from './types.js';
import { ValueProblem, formatHostPort, show, toDuration, toHostPort, toInteger, toSize } from './values.js';

// Converters of settings that a flag and the config file (or the environment) both give: the
// listen and admin addresses, a token file, peers, the zone, URLs, numbers, a list of upstreams.
// Flags: flag-config.ts; the file and the environment: file-config.ts; merged by load-config.ts.

/**
 * listen: host:port, or unix:PATH — a Unix domain socket instead of a TCP listener (the path made
 * absolute: the socket is removed at shutdown from wherever respool runs).
 */
export function convertListen(v: string | undefined, set: (key: string, value: unknown) => void, problem: (p: string) => void): void {
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
export function toSocketMode(v: unknown): number {
  if (typeof v !== 'string' || !/^0?[0-7]{3}$/.test(v)) throw new ValueProblem(`must be permission bits in octal, like "660" (got ${show(v)})`);
  return parseInt(v, 8);
}

/** The admin server's address: host:port, or a bare port on loopback (127.0.0.1). */
export function toAdminAddress(v: unknown): HostPort {
  if (typeof v === 'number' || (typeof v === 'string' && /^\d{1,5}$/.test(v.trim()))) return toHostPort(`127.0.0.1:${String(v).trim()}`, true);
  return toHostPort(v, true);
}

/** The first line of a secret-holding file, trimmed; a clear problem when it cannot be read. */
export function readFirstLine(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ValueProblem(`cannot read ${file} (${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (e as Error).message})`);
  }
  return (text.split(/\r?\n/)[0] ?? '').trim();
}

/** An admin token read from a file: its first line, trimmed; at least 16 characters. */
export function readTokenFile(file: string): string {
  const token = readFirstLine(file);
  if (token.length < 16) throw new ValueProblem(`the token in ${file} must be at least 16 characters on its first line`);
  return token;
}

/** An address given to clients (cluster.announce, cluster.peers): a port, and a host one can connect to. */
export function toAnnounced(v: unknown): HostPort {
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
export function toPeersFrom(v: unknown): PeersFrom {
  const m = typeof v === 'string' ? /^dns:([^\s:]+):(\d{1,5})$/.exec(v.trim()) : null;
  const port = m ? Number(m[2]) : NaN;
  if (m === null || port < 1 || port > 65535) {
    throw new ValueProblem(`must be dns:NAME:PORT, e.g. dns:respool-peers.default.svc.cluster.local:6380 (got ${show(v)})`);
  }
  return { kind: 'dns', name: m[1]!, port };
}

/** An availability zone name: non-empty, no whitespace (it becomes a metric label). */
export function toZone(v: unknown): string {
  if (typeof v !== 'string' || !/^\S+$/.test(v)) throw new ValueProblem(`must be a zone name without spaces (got ${show(v)})`);
  return v;
}

/** An http:// or https:// base URL, without a trailing slash. */
export function toHttpUrl(v: unknown): string {
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

export function toNumber(field: NumericField, v: unknown): number {
  switch (field.kind) {
    case 'integer': return toInteger(v, field);
    case 'size': return toSize(v, field);
    case 'duration': return toDuration(v, field);
  }
}

export function dedupe(list: HostPort[]): HostPort[] {
  const seen = new Set<string>();
  return list.filter((hp) => {
    const k = formatHostPort(hp);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
