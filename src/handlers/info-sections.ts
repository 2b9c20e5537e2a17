/**
 * INFO text as Valkey lays it out (server.c genValkeyInfoString, 8.0): which sections a request
 * names, taking a node's INFO apart into sections, and merging the primaries' sections into one
 * (sums where a sum means something, one node's answer otherwise). Pure functions: handlers/info.ts
 * does the fetching and adds respool's own sections.
 */

/** Valkey's sections in its output order (module sections follow keyspace, then debug). */
export const VALKEY_ORDER = [
  'server', 'clients', 'memory', 'persistence', 'stats', 'replication', 'cpu', 'modules',
  'commandstats', 'errorstats', 'latencystats', 'cluster', 'keyspace',
] as const;
export type ValkeySection = (typeof VALKEY_ORDER)[number];

/** Valkey's `INFO` / `INFO default` (genInfoSectionDict), plus respool's own section. */
const DEFAULT_SECTIONS = ['server', 'clients', 'memory', 'persistence', 'stats', 'replication', 'cpu', 'module_list', 'errorstats', 'cluster', 'keyspace', 'respool'];

/** Section headers as Valkey prints them (`# CPU`), and respool's. */
export const HEADERS: Readonly<Record<ValkeySection | 'respool', string>> = {
  server: 'Server', clients: 'Clients', memory: 'Memory', persistence: 'Persistence', stats: 'Stats',
  replication: 'Replication', cpu: 'CPU', modules: 'Modules', commandstats: 'Commandstats',
  errorstats: 'Errorstats', latencystats: 'Latencystats', cluster: 'Cluster', keyspace: 'Keyspace',
  respool: 'Respool',
};

const KNOWN_NAMES: ReadonlySet<string> = new Set([...VALKEY_ORDER, 'module_list', 'respool', 'default', 'all', 'everything']);

/** What one INFO request asks for (names lower-cased, as Valkey compares them). */
export interface InfoRequest {
  readonly names: ReadonlySet<string>;
  readonly all: boolean;
  readonly everything: boolean;
}

export function parseInfoRequest(args: readonly string[]): InfoRequest {
  const names = new Set<string>();
  let all = false;
  let everything = false;
  if (args.length === 0) for (const n of DEFAULT_SECTIONS) names.add(n);
  for (const raw of args) {
    const a = raw.toLowerCase();
    if (a === 'default') for (const n of DEFAULT_SECTIONS) names.add(n);
    else if (a === 'all') all = true;
    else if (a === 'everything') everything = all = true;
    else names.add(a);
  }
  return { names, all, everything };
}

/** Whether a Valkey section (or respool's) is part of the reply. */
export function wants(req: InfoRequest, section: ValkeySection | 'respool'): boolean {
  if (req.all) return true;
  if (section === 'modules') return req.names.has('modules') || req.names.has('module_list');
  return req.names.has(section);
}

/** Names respool does not know (module sections, `debug`): asked of a primary as they are. */
export function otherNames(req: InfoRequest): string[] {
  return [...req.names].filter((n) => !KNOWN_NAMES.has(n));
}

/** The INFO arguments for the primaries, or null when no section needs them. */
export function upstreamArgs(req: InfoRequest): string[] | null {
  if (req.everything) return ['everything'];
  const out: string[] = [];
  for (const s of VALKEY_ORDER) {
    if (s === 'clients' || s === 'latencystats' || !wants(req, s)) continue; // respool's own (info.ts)
    out.push(s === 'modules' && !req.names.has('modules') ? 'module_list' : s);
  }
  out.push(...otherNames(req));
  return out.length > 0 ? out : null;
}

/** One section of INFO text: its header (without "# ") and its lines. */
export interface InfoSection {
  readonly header: string;
  readonly lines: string[];
}

/** A node's INFO text, section by section, keyed by the lower-cased header. */
export function parseSections(text: string): Map<string, InfoSection> {
  const out = new Map<string, InfoSection>();
  let current: InfoSection | null = null;
  for (const line of text.split(/\r?\n/)) {
    if (line.startsWith('# ')) {
      current = { header: line.slice(2).trim(), lines: [] };
      out.set(current.header.toLowerCase(), current);
    } else if (line !== '' && current !== null) {
      current.lines.push(line);
    }
  }
  return out;
}

/** Sections as INFO prints them: `# Header`, its lines, a blank line between sections, CRLF. */
export function renderSections(sections: readonly InfoSection[]): string {
  return sections.map((s) => [`# ${s.header}`, ...s.lines].map((l) => `${l}\r\n`).join('')).join('\r\n');
}

function splitField(line: string): [string, string] {
  const colon = line.indexOf(':');
  return colon < 0 ? [line, ''] : [line.slice(0, colon), line.slice(colon + 1)];
}

/** `a=1,b=2` → entries, in order. */
function parsePairs(value: string): Array<[string, string]> {
  return value.split(',').map((p) => {
    const eq = p.indexOf('=');
    return eq < 0 ? [p, ''] : [p.slice(0, eq), p.slice(eq + 1)];
  });
}

const NUMBER = /^-?\d+(?:\.\d+)?$/;

function decimals(v: string): number {
  const dot = v.indexOf('.');
  return dot < 0 ? 0 : v.length - dot - 1;
}

function formatLike(n: number, sample: string): string {
  const d = decimals(sample);
  return d === 0 ? String(Math.round(n)) : n.toFixed(d);
}

/** The node that answers for a section respool cannot merge (the first primary in slot order): its first line names it. */
export function fromOneNode(key: string, header: string, nodes: ReadonlyArray<{ address: string; sections: Map<string, InfoSection> }>): InfoSection {
  for (const node of nodes) {
    const s = node.sections.get(key);
    if (s !== undefined) return { header: s.header, lines: [`respool_source:${node.address}`, ...s.lines] };
  }
  return { header, lines: [] };
}

/** Valkey 8.0's `# Stats` fields, in its order (a node's extra fields follow). */
export const STATS_FIELDS = [
  'total_connections_received', 'total_commands_processed', 'instantaneous_ops_per_sec', 'total_net_input_bytes',
  'total_net_output_bytes', 'total_net_repl_input_bytes', 'total_net_repl_output_bytes', 'instantaneous_input_kbps',
  'instantaneous_output_kbps', 'instantaneous_input_repl_kbps', 'instantaneous_output_repl_kbps', 'rejected_connections',
  'sync_full', 'sync_partial_ok', 'sync_partial_err', 'expired_keys', 'expired_stale_perc', 'expired_time_cap_reached_count',
  'expire_cycle_cpu_milliseconds', 'evicted_keys', 'evicted_clients', 'evicted_scripts', 'total_eviction_exceeded_time',
  'current_eviction_exceeded_time', 'keyspace_hits', 'keyspace_misses', 'pubsub_channels', 'pubsub_patterns',
  'pubsubshard_channels', 'latest_fork_usec', 'total_forks', 'migrate_cached_sockets', 'slave_expires_tracked_keys',
  'active_defrag_hits', 'active_defrag_misses', 'active_defrag_key_hits', 'active_defrag_key_misses',
  'total_active_defrag_time', 'current_active_defrag_time', 'tracking_total_keys', 'tracking_total_items',
  'tracking_total_prefixes', 'unexpected_error_replies', 'total_error_replies', 'dump_payload_sanitizations',
  'total_reads_processed', 'total_writes_processed', 'io_threaded_reads_processed', 'io_threaded_writes_processed',
  'io_threaded_freed_objects', 'io_threaded_poll_processed', 'io_threaded_total_prefetch_batches',
  'io_threaded_total_prefetch_entries', 'client_query_buffer_limit_disconnections',
  'client_output_buffer_limit_disconnections', 'reply_buffer_shrinks', 'reply_buffer_expands', 'eventloop_cycles',
  'eventloop_duration_sum', 'eventloop_duration_cmd_sum', 'instantaneous_eventloop_cycles_per_sec',
  'instantaneous_eventloop_duration_usec', 'acl_access_denied_auth', 'acl_access_denied_cmd', 'acl_access_denied_key',
  'acl_access_denied_channel',
];

/** Each field's values over the nodes' sections, fields in the order first seen. */
function valuesByField(sections: readonly InfoSection[]): Map<string, string[]> {
  const values = new Map<string, string[]>();
  for (const s of sections) {
    for (const line of s.lines) {
      const [k, v] = splitField(line);
      let vs = values.get(k);
      if (vs === undefined) values.set(k, (vs = []));
      vs.push(v);
    }
  }
  return values;
}

/**
 * `# Stats`: respool's own counters where it has them (`own`), otherwise the primaries' fields
 * combined: percentages averaged, latest_fork_usec and tracking_total_prefixes the largest, every other number summed; a
 * text field is the first node's. A field no node gave is 0.
 */
export function mergeStats(sections: readonly InfoSection[], own: ReadonlyMap<string, number>): InfoSection {
  const values = valuesByField(sections);
  const names = [...STATS_FIELDS];
  for (const k of values.keys()) if (!names.includes(k)) names.push(k);
  const lines = names.map((k) => {
    const mine = own.get(k);
    if (mine !== undefined) return `${k}:${mine}`;
    const vs = values.get(k) ?? [];
    if (vs.length === 0) return `${k}:0`;
    if (!vs.every((v) => NUMBER.test(v))) return `${k}:${vs[0]}`;
    const ns = vs.map(Number);
    let n: number;
    if (k.endsWith('_perc')) n = ns.reduce((a, b) => a + b, 0) / ns.length;
    // A BCAST client's prefixes are registered on every primary: the largest count is the number of prefixes.
    else if (k === 'latest_fork_usec' || k === 'tracking_total_prefixes') n = Math.max(...ns);
    else n = ns.reduce((a, b) => a + b, 0);
    return `${k}:${formatLike(n, vs[0]!)}`;
  });
  return { header: sections[0]?.header ?? HEADERS.stats, lines };
}

/** Valkey's bytesToHuman (server.c): B, then K, M, G, T, P with two decimals. */
export function bytesToHuman(n: number): string {
  const units = ['K', 'M', 'G', 'T', 'P'];
  if (n < 1024) return `${n}B`;
  let value = n / 1024;
  for (const unit of units) {
    if (value < 1024 || unit === 'P') return `${value.toFixed(2)}${unit}`;
    value /= 1024;
  }
  return `${n}B`;
}

/**
 * `# Memory` for the data set as one server would hold it: bytes summed over the primaries (as
 * `keyspace` sums keys), so used_memory and maxmemory compare as they would on one node, and
 * a maxmemory a client derives from used_memory (CONFIG SET then goes to every node) leaves every
 * node room. `*_human` fields are recomputed from the sums, ratios and percentages averaged, text
 * fields (maxmemory_policy, mem_allocator) the first node's. Counts of scripts and functions are
 * the largest: SCRIPT LOAD and FUNCTION LOAD reach every node, so one server would hold that many.
 */
export function mergeMemory(sections: readonly InfoSection[]): InfoSection {
  const values = valuesByField(sections);
  const merged = new Map<string, string>();
  for (const [k, vs] of values) {
    if (k.endsWith('_human') || !vs.every((v) => NUMBER.test(v))) {
      merged.set(k, vs[0]!);
      continue;
    }
    const ns = vs.map(Number);
    const sum = ns.reduce((a, b) => a + b, 0);
    const averaged = k.includes('ratio') || k.endsWith('_perc');
    const largest = k === 'number_of_cached_scripts' || k === 'number_of_functions' || k === 'number_of_libraries';
    merged.set(k, formatLike(largest ? Math.max(...ns) : averaged ? sum / ns.length : sum, vs[0]!));
  }
  for (const k of merged.keys()) {
    const base = merged.get(k.slice(0, -'_human'.length));
    if (k.endsWith('_human') && base !== undefined && NUMBER.test(base)) merged.set(k, bytesToHuman(Number(base)));
  }
  return { header: sections[0]?.header ?? HEADERS.memory, lines: [...merged].map(([k, v]) => `${k}:${v}`) };
}

/**
 * `# Persistence` as one server holding every primary's data would report it: a save, rewrite or
 * load in progress anywhere is in progress (a test that starts BGSAVE and watches
 * rdb_bgsave_in_progress must see the node that has keys to save, not only the first one), a
 * status is `err` when any node's is, durations the longest, rdb_last_save_time the oldest (every
 * node saved at or after it), percentages averaged, other numbers (changes, saves, keys, bytes)
 * summed; a text field is the first node's.
 */
export function mergePersistence(sections: readonly InfoSection[]): InfoSection {
  const lines = [...valuesByField(sections)].map(([k, vs]) => {
    if (k.endsWith('_status')) return `${k}:${vs.find((v) => v !== 'ok') ?? 'ok'}`;
    if (!vs.every((v) => NUMBER.test(v))) return `${k}:${vs[0]}`;
    const ns = vs.map(Number);
    let n: number;
    if (k.endsWith('_in_progress') || k.endsWith('_scheduled') || k.endsWith('_time_sec') || k.endsWith('_age') || k === 'loading' || k === 'async_loading' || k === 'aof_enabled') n = Math.max(...ns);
    else if (k === 'rdb_last_save_time') n = Math.min(...ns);
    else if (k.endsWith('_perc')) n = ns.reduce((a, b) => a + b, 0) / ns.length;
    else n = ns.reduce((a, b) => a + b, 0);
    return `${k}:${formatLike(n, vs[0]!)}`;
  });
  return { header: sections[0]?.header ?? HEADERS.persistence, lines };
}

/** `name:a=1,b=2` lines summed per name and per field; `recompute` derives fields from the sums. */
function sumPairs(sections: readonly InfoSection[], recompute?: (fields: Map<string, number>, samples: Map<string, string>) => void): string[] {
  const byName = new Map<string, { fields: Map<string, number>; samples: Map<string, string> }>();
  for (const s of sections) {
    for (const line of s.lines) {
      const [name, value] = splitField(line);
      let entry = byName.get(name);
      if (entry === undefined) {
        entry = { fields: new Map(), samples: new Map() };
        byName.set(name, entry);
      }
      for (const [k, v] of parsePairs(value)) {
        if (!entry.samples.has(k)) entry.samples.set(k, v);
        entry.fields.set(k, (entry.fields.get(k) ?? 0) + (NUMBER.test(v) ? Number(v) : 0));
      }
    }
  }
  const lines: string[] = [];
  for (const [name, { fields, samples }] of byName) {
    recompute?.(fields, samples);
    lines.push(`${name}:${[...fields].map(([k, n]) => `${k}=${formatLike(n, samples.get(k) ?? '0')}`).join(',')}`);
  }
  return lines;
}

/** `# Commandstats`: calls, usec, rejected_calls, failed_calls summed per command; usec_per_call from the sums. */
export function mergeCommandStats(sections: readonly InfoSection[]): InfoSection {
  const lines = sumPairs(sections, (f, samples) => {
    if (!f.has('usec_per_call')) return;
    const calls = f.get('calls') ?? 0;
    f.set('usec_per_call', calls === 0 ? 0 : (f.get('usec') ?? 0) / calls);
    samples.set('usec_per_call', '0.00');
  });
  return { header: sections[0]?.header ?? HEADERS.commandstats, lines };
}

/** `# Errorstats`: counts summed per error code. */
export function mergeErrorStats(sections: readonly InfoSection[]): InfoSection {
  return { header: sections[0]?.header ?? HEADERS.errorstats, lines: sumPairs(sections) };
}

/** `# Keyspace`: keys and expires summed per db; avg_ttl weighted by each node's expires. */
export function mergeKeyspace(sections: readonly InfoSection[]): InfoSection {
  const lines = sumPairs(sections.map((s) => ({
    header: s.header,
    // Weight avg_ttl by expires before summing; divided again below.
    lines: s.lines.map((line) => {
      const [db, value] = splitField(line);
      const pairs = parsePairs(value);
      const expires = Number(pairs.find(([k]) => k === 'expires')?.[1] ?? 0);
      return `${db}:${pairs.map(([k, v]) => (k === 'avg_ttl' ? `${k}=${Number(v) * expires}` : `${k}=${v}`)).join(',')}`;
    }),
  })), (f) => {
    if (!f.has('avg_ttl')) return;
    const expires = f.get('expires') ?? 0;
    f.set('avg_ttl', expires === 0 ? 0 : Math.round((f.get('avg_ttl') ?? 0) / expires));
  });
  lines.sort((a, b) => Number(a.slice(2, a.indexOf(':'))) - Number(b.slice(2, b.indexOf(':'))));
  return { header: sections[0]?.header ?? HEADERS.keyspace, lines };
}
