// Who holds a Valkey node's client connections, read from the node itself (CLIENT LIST) and
// from respool's admin endpoint (/metrics). Shared by bench/blocking.mjs and bench/pubsub-fanout.mjs.
import { HOST } from './common.mjs';

/** CLIENT LIST text → [{ field: value }] (one object per connection). */
export function parseClientList(text) {
  const out = [];
  for (const line of String(text).split('\n')) {
    const l = line.trim();
    if (!l) continue;
    out.push(Object.fromEntries(l.split(' ').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])));
  }
  return out;
}

/**
 * One node's connections by client name, leaving out the caller's own connection (`conn`, a
 * RespConn to that node). Returns { total, byName: { name|"(unnamed)": n }, blocked: n (flags
 * contain b), pubsub: n (subscribed to something), pubsubByName }.
 */
export async function clientCensus(conn) {
  const [list, id] = await Promise.all([conn.callT(5000, 'CLIENT', 'LIST'), conn.callT(5000, 'CLIENT', 'ID')]);
  const byName = {};
  const pubsubByName = {};
  let total = 0;
  let blocked = 0;
  let pubsub = 0;
  for (const c of parseClientList(list)) {
    if (Number(c.id) === id) continue;
    total++;
    const name = c.name || '(unnamed)';
    byName[name] = (byName[name] ?? 0) + 1;
    if (String(c.flags).includes('b')) blocked++;
    // Valkey 8 reports sub/psub/ssub counts; a connection subscribed to anything is a pub/sub client.
    if (Number(c.sub) + Number(c.psub) + Number(c.ssub ?? 0) > 0 || String(c.flags).includes('P')) {
      pubsub++;
      pubsubByName[name] = (pubsubByName[name] ?? 0) + 1;
    }
  }
  return { total, byName, blocked, pubsub, pubsubByName };
}

/**
 * respool's /metrics as [{ name, labels: {…}, value }] for the metric names given (exact names,
 * e.g. "respool_leased_connections"). Returns null when the admin endpoint does not answer.
 */
export async function respoolMetrics(adminPort, names) {
  let text;
  try {
    const res = await fetch(`http://${HOST}:${adminPort}/metrics`, { signal: AbortSignal.timeout(5000) });
    text = await res.text();
  } catch {
    return null;
  }
  const want = new Set(names);
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || !want.has(m[1])) continue;
    const labels = {};
    for (const kv of (m[3] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]] = kv[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

/** Sum of a metric's samples whose labels match `where` (a { label: value } subset). */
export function sumMetric(samples, name, where = {}) {
  if (!samples) return NaN;
  return samples
    .filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}
