import type { TenantLimits } from '../config/types.js';
import { toSize, ValueProblem } from '../config/values.js';
import { BYTES_PER_SECOND } from '../config/file-config.js';

/** Each limit by the names RESPOOL TENANT SET (kebab case) and the admin endpoint (the config's) give it. */
const FIELDS: Record<string, keyof TenantLimits> = {
  'ops-per-second': 'opsPerSecond', opspersecond: 'opsPerSecond',
  'bytes-per-second': 'bytesPerSecond', bytespersecond: 'bytesPerSecond',
  'max-clients': 'maxClients', maxclients: 'maxClients',
  'max-inflight': 'maxInflight', maxinflight: 'maxInflight',
};

/**
 * A tenant's limits after changes given at run time (RESPOOL TENANT SET, POST /tenants): each
 * change a limit's name and its value — a number as in the config (bytes-per-second also a size
 * such as 20mb), or `none` / null for no limit. The error text names the bad change.
 */
export function changedLimits(current: TenantLimits, changes: ReadonlyArray<readonly [string, unknown]>): TenantLimits | string {
  const next = { ...current };
  for (const [name, raw] of changes) {
    const field = FIELDS[name.toLowerCase()];
    if (field === undefined) return `unknown limit '${name}' (ops-per-second, bytes-per-second, max-clients, max-inflight)`;
    if (raw === null || (typeof raw === 'string' && raw.toLowerCase() === 'none')) {
      next[field] = null;
      continue;
    }
    if (field === 'bytesPerSecond') {
      try {
        next[field] = toSize(typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : raw, BYTES_PER_SECOND);
      } catch (e) {
        if (e instanceof ValueProblem) return `${name}: ${e.message}`;
        throw e;
      }
      continue;
    }
    const value = typeof raw === 'number' ? raw : typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : NaN;
    const whole = field !== 'opsPerSecond';
    if (!Number.isFinite(value) || value <= 0 || (whole && !Number.isInteger(value))) {
      return `${name} must be ${whole ? 'a whole number, at least 1' : 'a number of requests per second above 0'}, or none`;
    }
    next[field] = value;
  }
  return next;
}

/** RESPOOL TENANT SET's limit–value pairs, from `args[from]` on (the handler, and main.ts for another worker's command). */
export function limitPairs(args: readonly Buffer[], from: number): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = from; i + 1 < args.length; i += 2) out.push([args[i]!.toString(), args[i + 1]!.toString()]);
  return out;
}
