// Converting one setting from its written form (a YAML value or a flag's string) to the value
// RespoolConfig holds, and formatting values back for messages and --help. A converter throws
// ValueProblem with text that does not name the field; the caller prefixes the flag or field.

import { isIPv6 } from 'node:net';
import type { HostPort } from './types.js';

export class ValueProblem extends Error {}

export const KiB = 1024;
export const MiB = 1024 * KiB;
export const GiB = 1024 * MiB;
export const TiB = 1024 * GiB;

/**
 * Sizes follow valkey.conf: k/m/g/t are powers of 1000, kb/mb/gb/tb (and kib/mib/gib/tib) are
 * powers of 1024, b is bytes, no unit is bytes; case does not matter. Written without the `i`
 * flag because the JSON Schema uses the same source (ajv compiles patterns with `u` only).
 */
export const SIZE_PATTERN = /^(\d+(?:\.\d+)?) *([bB]|[kKmMgGtT](?:[iI]?[bB])?)?$/;
/** Durations: ms, s, m (minutes), h; no unit is milliseconds. */
export const DURATION_PATTERN = /^(\d+(?:\.\d+)?) *([mM][sS]|[sSmMhH])?$/;
/** An environment variable name, for passwordEnv. */
export const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

const SIZE_UNITS: Record<string, number> = {
  '': 1, b: 1,
  k: 1e3, m: 1e6, g: 1e9, t: 1e12,
  kb: KiB, mb: MiB, gb: GiB, tb: TiB,
  kib: KiB, mib: MiB, gib: GiB, tib: TiB,
};
const DURATION_UNITS: Record<string, number> = { '': 1, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export interface Range {
  min: number;
  max: number;
}

/** A non-negative whole number; strings must be plain digits (flags arrive as strings). */
export function toInteger(value: unknown, range: Range): number {
  const n =
    typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value.trim()) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < range.min || n > range.max) {
    throw new ValueProblem(`must be an integer from ${range.min} to ${range.max} (got ${show(value)})`);
  }
  return n;
}

/** Bytes from 1234, "1234", "64kb", "512mb", "1gb", "1.5gb". */
export function toSize(value: unknown, range: Range): number {
  const n = withUnit(value, SIZE_PATTERN, SIZE_UNITS);
  if (n === undefined) throw new ValueProblem(`must be a size like 512mb (got ${show(value)})`);
  if (!Number.isInteger(n)) throw new ValueProblem(`must be a whole number of bytes (got ${show(value)})`);
  if (n < range.min || n > range.max) {
    throw new ValueProblem(`must be a size from ${formatSize(range.min)} to ${formatSize(range.max)} (got ${show(value)})`);
  }
  return n;
}

/** Milliseconds from 200, "200", "200ms", "5s", "1.5s", "2m", "1h". */
export function toDuration(value: unknown, range: Range): number {
  const n = withUnit(value, DURATION_PATTERN, DURATION_UNITS);
  if (n === undefined) throw new ValueProblem(`must be a duration like 5s or 200ms (got ${show(value)})`);
  if (!Number.isInteger(n)) throw new ValueProblem(`must be a whole number of milliseconds (got ${show(value)})`);
  if (n < range.min || n > range.max) {
    throw new ValueProblem(
      `must be a duration from ${formatDuration(range.min)} to ${formatDuration(range.max)} (got ${show(value)})`,
    );
  }
  return n;
}

function withUnit(value: unknown, pattern: RegExp, units: Record<string, number>): number | undefined {
  if (typeof value === 'number') return Number.isInteger(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const m = pattern.exec(value.trim());
  if (!m) return undefined;
  const factor = units[(m[2] ?? '').toLowerCase()];
  if (factor === undefined) return undefined;
  // Multiply in integers where possible so "0.5kb" is exactly 512.
  const [whole, frac = ''] = m[1]!.split('.');
  const scale = 10 ** frac.length;
  const n = (Number(whole) * scale + Number(frac || '0')) * factor / scale;
  return Number.isFinite(n) ? n : undefined;
}

/**
 * "host:port" or "[ipv6]:port". `allowPortZero` is for listening addresses, where 0 asks the OS
 * for a free port. The IPv6 host is returned without brackets.
 */
export function toHostPort(value: unknown, allowPortZero: boolean): HostPort {
  const minPort = allowPortZero ? 0 : 1;
  if (typeof value !== 'string') throw new ValueProblem(`expected host:port (got ${show(value)})`);
  const s = value.trim();
  let host: string;
  let portText: string;
  const bracketed = /^\[([^\]]*)\]:(.*)$/.exec(s);
  if (bracketed) {
    host = bracketed[1]!;
    portText = bracketed[2]!;
    if (!isIPv6(host)) {
      throw new ValueProblem(`expected host:port, "[${host}]" is not an IPv6 address (got ${show(value)})`);
    }
  } else {
    const colon = s.lastIndexOf(':');
    if (colon < 0) throw new ValueProblem(`expected host:port (got ${show(value)})`);
    host = s.slice(0, colon);
    portText = s.slice(colon + 1);
    if (host.includes(':')) {
      throw new ValueProblem(`expected host:port, with an IPv6 address in brackets like [::1]:6379 (got ${show(value)})`);
    }
    if (!/^[A-Za-z0-9._-]+$/.test(host)) throw new ValueProblem(`expected host:port (got ${show(value)})`);
  }
  if (!/^\d{1,5}$/.test(portText)) throw new ValueProblem(`expected host:port (got ${show(value)})`);
  const port = Number(portText);
  if (port < minPort || port > 65535) {
    throw new ValueProblem(`port must be from ${minPort} to 65535 (got ${show(value)})`);
  }
  return { host, port };
}

/** workers: "auto" or a number of processes, 1..64. */
export function toWorkers(value: unknown): number | 'auto' {
  if (value === 'auto') return 'auto';
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  if (Number.isInteger(n) && n >= 1 && n <= 64) return n;
  throw new ValueProblem(`expected a number of processes (1..64) or auto (got ${show(value)})`);
}

/** limits.maxMemory: "auto", or a size (0 = off). */
export function toMaxMemory(value: unknown): number | 'auto' {
  if (value === 'auto') return 'auto';
  return toSize(value, { min: 0, max: 1024 * TiB });
}

export function toEnum<T extends string>(value: unknown, allowed: readonly T[]): T {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
  const hint = typeof value === 'string' ? suggest(value, allowed) : undefined;
  throw new ValueProblem(
    `must be one of ${allowed.join(', ')} (got ${show(value)}${hint ? `, did you mean "${hint}"?` : ''})`,
  );
}

// ---- formatting -------------------------------------------------------------------------------

/** The way a user writes it: 512mb, 64kb, 1gb, 1000b. */
export function formatSize(bytes: number): string {
  for (const [unit, f] of [['tb', TiB], ['gb', GiB], ['mb', MiB], ['kb', KiB]] as const) {
    if (bytes >= f && bytes % f === 0) return `${bytes / f}${unit}`;
  }
  return `${bytes}b`;
}

export function formatDuration(ms: number): string {
  for (const [unit, f] of [['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (ms >= f && ms % f === 0) return `${ms / f}${unit}`;
  }
  return `${ms}ms`;
}

export function formatHostPort(hp: HostPort): string {
  return hp.host.includes(':') ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`;
}

/** A value as it appears in "(got …)": strings quoted, long ones cut. */
export function show(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return value.length === 0 ? '[]' : 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  return String(value);
}

// ---- "did you mean" ---------------------------------------------------------------------------

/**
 * The closest candidate to a mistyped name, or undefined. Spelling variants that differ only in
 * case, "-" or "_" always match (max_bulk_length → maxBulkLength, --connectionsPerNode →
 * connections-per-node); otherwise the edit distance must be small for the name's length.
 */
export function suggest(input: string, candidates: Iterable<string>): string | undefined {
  const norm = (s: string) => s.toLowerCase().replace(/[-_]/g, '');
  const wanted = norm(input);
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    if (norm(c) === wanted) return c;
    const d = editDistance(wanted, norm(c));
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  const allowed = Math.max(1, Math.floor(wanted.length / 4));
  return bestDistance <= allowed ? best : undefined;
}

/** Optimal string alignment distance: insert, delete, substitute, swap two neighbours. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}
