#!/usr/bin/env node
// Writes docs/configuration.md: one row per setting, generated from the config schema so the
// reference cannot drift from the code. It reads the BUILT modules (run `npm run build` first):
//   dist/config/schema.js      CONFIG_FILE_SCHEMA (the settings and their 'x-expect' phrases), NUMERIC_FIELDS
//   dist/config/defaults.js    DEFAULT_CONFIG (the defaults)
//   dist/config/env-config.js  envSettings() / envName(): the RESPOOL_* variable of each setting
//   dist/config/flags.js       FLAGS; dist/config/flag-config.js convertFlags(): which setting a flag sets
// and, for the descriptions, the comments on the fields of src/config/*.ts (RespoolConfig and the
// interfaces it names). test/unit/config-doc.test.ts runs `--check` and fails while the page is stale.
//
//   npm run docs:config                         # = npm run build && node scripts/gen-config-doc.mjs
//   node scripts/gen-config-doc.mjs --check     # exit 1 (with a hint) when docs/configuration.md differs

import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..');
const dist = (p) => import(path.join(root, 'dist', p));

const { CONFIG_FILE_SCHEMA, NUMERIC_FIELDS } = await dist('config/schema.js');
const { DEFAULT_CONFIG } = await dist('config/defaults.js');
const { envSettings, envName } = await dist('config/env-config.js');
const { FLAGS, UPSTREAM_PASSWORD_ENV, ADMIN_TOKEN_ENV } = await dist('config/flags.js');
const { convertFlags } = await dist('config/flag-config.js');
const { DURATION_PATTERN, SIZE_PATTERN, formatDuration, formatSize } = await dist('config/values.js');
const { ZONE_ENV } = await dist('cluster/zone-discovery.js');

const OUT = path.join(root, 'docs/configuration.md');

// ---- where the file's settings live in RespoolConfig (for defaults and descriptions) ----------

// The file's admin mapping is three fields of RespoolConfig; every other path is the same in both.
const RUNTIME_PATH = {
  'admin.address': 'admin',
  'admin.token': 'adminToken',
  'admin.readToken': 'adminReadToken',
};
const RUNTIME_COMMENT_PATH = { ...RUNTIME_PATH, 'admin.tokenFile': 'adminToken', 'admin.readTokenFile': 'adminReadToken' };
// Settings-map keys (what convertFlags sets) that are not a file path: the flag's file setting.
const FLAG_KEY_PATH = { adminToken: 'admin.tokenFile' };
// Variables outside the RESPOOL_<PATH> scheme (flags.js, cluster/zone-discovery.js) and their setting.
const EXTRA_ENV = [
  { name: UPSTREAM_PASSWORD_ENV, path: 'upstreamAuth.password' },
  { name: ADMIN_TOKEN_ENV, path: 'admin.token' },
  { name: ZONE_ENV, path: 'reads.zone' },
];
// The page that explains each group, linked under its heading.
const GROUP_PAGE = {
  tls: 'security.md#tls', upstreamTls: 'security.md#tls', admin: 'operations.md#admin-server',
  upstreamAuth: 'security.md', users: 'security.md#users-and-permissions', acl: 'security.md#users-and-permissions',
  limits: 'pooling.md', cluster: 'fleet.md', resilience: 'resilience.md', clients: 'resilience.md',
  reads: 'reads.md', hotKeys: 'hot-keys.md', dedicated: 'commands.md', pubsub: 'commands.md',
  admission: 'pooling.md', transactions: 'commands.md#commands-over-keys-in-several-slots',
  slowlog: 'operations.md#slow-requests-latency-saturated-nodes-big-keys',
  commandlog: 'operations.md#slow-requests-latency-saturated-nodes-big-keys',
  latency: 'operations.md#slow-requests-latency-saturated-nodes-big-keys',
  saturation: 'operations.md#slow-requests-latency-saturated-nodes-big-keys',
  bigKeys: 'operations.md#slow-requests-latency-saturated-nodes-big-keys',
};

// ---- the rows -----------------------------------------------------------------------------------

const typesOf = (s) => (Array.isArray(s.type) ? s.type : typeof s.type === 'string' ? [s.type] : []);
const numeric = new Map(NUMERIC_FIELDS.map((f) => [f.path, f]));

/**
 * Every setting, in the schema's order: envSettings() walks CONFIG_FILE_SCHEMA's properties
 * (a leaf is a property that is not a mapping with properties; a mapping that also takes a
 * string or null, like admin, is a row too). Lists of mappings (users, reads.prefixes,
 * hotKeys.split) get a row per field of their entries after their own, as `users[].name`.
 */
function settings() {
  const byPath = new Map(envSettings().map((s) => [s.path, s]));
  const rows = [];
  const walk = (schema, p, item) => {
    const props = schema.properties;
    const types = typesOf(schema);
    if (props !== undefined && types.includes('object')) {
      if (p !== '' && types.some((t) => t !== 'object')) rows.push({ path: p, schema, item });
      for (const [k, s] of Object.entries(props)) walk(s, p === '' ? k : `${p}.${k}`, item);
      return;
    }
    rows.push({ path: p, schema, item });
    if (types.includes('array') && schema.items?.properties !== undefined) {
      for (const [k, s] of Object.entries(schema.items.properties)) walk(s, `${p}[].${k}`, true);
    }
  };
  walk(CONFIG_FILE_SCHEMA, '', false);
  const walked = rows.filter((r) => !r.item).map((r) => r.path);
  const missing = [...byPath.keys()].filter((p) => !walked.includes(p));
  if (missing.length > 0 || walked.some((p) => !byPath.has(p))) {
    throw new Error(`the schema walk and envSettings() disagree: ${missing.join(', ')} / ${walked.filter((p) => !byPath.has(p)).join(', ')}`);
  }
  return rows;
}

/** The numeric kind of a setting: NUMERIC_FIELDS, else the written form its pattern allows. */
function kindOf(p, schema) {
  const f = numeric.get(p);
  if (f) return f.kind;
  const pattern = typeof schema.pattern === 'string' ? schema.pattern : '';
  if (pattern.includes(DURATION_PATTERN.source)) return 'duration';
  if (pattern.includes(SIZE_PATTERN.source)) return 'size';
  return undefined;
}

const code = (s) => `\`${s}\``;

function formatValue(v, kind, schema) {
  if (v === undefined) return '—';
  if (typeof v === 'number') {
    if (typeof schema.pattern === 'string' && /\[0-7\]/.test(schema.pattern) && typesOf(schema).includes('string')) {
      return code(v.toString(8)); // permission bits, written in octal
    }
    if (v === 0) return code('0');
    if (kind === 'size') return code(formatSize(v));
    if (kind === 'duration') return code(formatDuration(v));
    return code(String(v));
  }
  if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).join() === 'host,port') {
    return code(v.host.includes(':') ? `[${v.host}]:${v.port}` : `${v.host}:${v.port}`);
  }
  if (typeof v === 'string') return code(v);
  return code(JSON.stringify(v));
}

function defaultOf(row) {
  if (row.item) return '—';
  const runtime = (RUNTIME_PATH[row.path] ?? row.path).split('.');
  let at = DEFAULT_CONFIG;
  for (const k of runtime) {
    if (at === null || typeof at !== 'object' || !(k in at)) return '—';
    at = at[k];
  }
  return formatValue(at, kindOf(row.path, row.schema), row.schema);
}

function accepts(row) {
  const s = row.schema;
  let text;
  if (Array.isArray(s.enum)) text = `one of ${s.enum.map(code).join(', ')}`;
  else {
    text = String(s['x-expect'] ?? typesOf(s).join(' or '));
    const m = / must be (.*)$/.exec(text);
    if (m) text = m[1];
    text = text.replace(/^(must be|expected) /, '');
  }
  const f = numeric.get(row.path);
  if (f && (f.kind === 'size' || f.kind === 'duration')) {
    const fmt = f.kind === 'size' ? formatSize : formatDuration;
    text += `, ${f.min === 0 ? '0' : fmt(f.min)} to ${fmt(f.max)}`;
  }
  return text;
}

/** Flag → the settings it sets: numeric flags name their field; the others are asked convertFlags() with a sample value. */
function flagPaths(rowPaths) {
  const byPath = new Map();
  const other = [];
  const add = (p, flag) => {
    if (!byPath.has(p)) byPath.set(p, []);
    if (!byPath.get(p).includes(flag)) byPath.get(p).push(flag);
  };
  for (const f of FLAGS) {
    if (f.field) {
      add(f.field.path, f.name);
      continue;
    }
    const keys = f.type === 'string' ? probeFlag(f) : [];
    const paths = keys.map((k) => FLAG_KEY_PATH[k] ?? k).filter((p) => rowPaths.has(p));
    if (paths.length === 0) other.push(f);
    for (const p of paths) add(p, f.name);
  }
  return { byPath, other };
}

/** The settings-map keys a flag sets, for the first sample value it accepts. */
function probeFlag(f) {
  const candidates = [
    f.default, ...(f.value ?? '').split('|'),
    '127.0.0.1:6390', '1', 'on', 'k', 'dns:respool-peers:6380', 'http://169.254.169.254',
    self, // a readable file whose first line is long enough for a token
  ].filter((v) => typeof v === 'string' && v !== '');
  for (const v of candidates) {
    const problems = [];
    let out;
    try {
      out = convertFlags({ [f.name]: f.multiple ? [v] : v }, {}, problems);
    } catch {
      continue;
    }
    if (problems.length === 0 && out.size > 0) return [...out.keys()];
  }
  return [];
}

// ---- descriptions: the comments on RespoolConfig's fields --------------------------------------

const COMMENT_SOURCES = ['types.ts', 'hot-keys-config.ts', 'tls-config.ts', 'observability-config.ts'];

/** interface name (or "Interface.inlineField") → field → { type, comment }. */
function readFieldComments() {
  const scopes = new Map();
  const field = (scope, name, type, comment) => {
    if (!scopes.has(scope)) scopes.set(scope, new Map());
    scopes.get(scope).set(name, { type, comment });
  };
  for (const file of COMMENT_SOURCES) {
    const lines = readFileSync(path.join(root, 'src/config', file), 'utf8').split('\n');
    let stack = null; // inside an interface: [name, inline field, …]
    let doc = null; // the /** … */ comment before the next field
    let inDoc = false;
    for (const raw of lines) {
      const line = raw.trim();
      if (inDoc) {
        const end = line.includes('*/');
        doc.push(line.replace(/\*\/.*$/, '').replace(/^\*\s?/, ''));
        if (end) inDoc = false;
        continue;
      }
      if (stack === null) {
        const m = /^(?:export )?interface (\w+)\b.*\{$/.exec(line);
        if (m) stack = [m[1]];
        doc = null;
        continue;
      }
      if (line.startsWith('/**')) {
        doc = [line.replace(/^\/\*\*\s?/, '').replace(/\s*\*\/.*$/, '')];
        inDoc = !line.includes('*/');
        continue;
      }
      if (line.startsWith('}')) {
        stack.pop();
        if (stack.length === 0) stack = null;
        doc = null;
        continue;
      }
      const cut = line.indexOf('//');
      const codePart = (cut >= 0 ? line.slice(0, cut) : line).trim();
      const trailing = cut >= 0 ? line.slice(cut + 2).trim() : '';
      const m = /^(\w+)\??:\s*(.*?);?$/.exec(codePart);
      if (!m) continue;
      const scope = stack.join('.');
      const comment = [doc?.join(' ').trim(), trailing].filter(Boolean).join(' ');
      doc = null;
      const [, name, type] = m;
      if (type === '{') {
        field(scope, name, '{', comment);
        stack.push(name);
        continue;
      }
      field(scope, name, type, comment);
      const inline = /^\{(.*)\}/.exec(type); // { a: number; b: string } on one line
      if (inline) {
        for (const part of inline[1].split(';')) {
          const sub = /^\s*(\w+)\??:\s*(.*)$/.exec(part);
          if (sub) field(`${scope}.${name}`, sub[1], sub[2].trim(), '');
        }
      }
    }
  }
  return scopes;
}

/** A field's comment, less what the other columns say (its default). */
function describe(scopes, filePath) {
  if (filePath.includes('[]')) return '';
  let scope = 'RespoolConfig';
  let entry;
  for (const k of (RUNTIME_COMMENT_PATH[filePath] ?? filePath).split('.')) {
    entry = scopes.get(scope)?.get(k);
    if (entry === undefined) return '';
    const named = /^([A-Z]\w*)\b/.exec(entry.type);
    scope = named && scopes.has(named[1]) ? named[1] : `${scope}.${k}`;
  }
  return cleanComment(entry.comment);
}

/**
 * The comment as written, less the bare statements of a default ("default 5", "(default 64)",
 * ", default 3", "Default 10000."): the default column says what the code uses. A default with an
 * explanation ("default 1000: leased connections to one node at once") stays as it is.
 */
function cleanComment(text) {
  const v = String.raw`(?:[^\s;,:]|:(?!\s))+(?: [KMGT]iB)?`; // a default's value: 5, 64 MiB, 127.0.0.1:6380
  let t = text.trim();
  t = t.replace(new RegExp(String.raw`^default ${v}$`), ''); // the whole comment: "default auto"
  t = t.replace(new RegExp(String.raw`^default ${v}\s*\(([^()]*)\)$`), '$1'); // "default 15000 (Valkey's …)"
  t = t.replace(new RegExp(String.raw`^default ${v}(?: \([^()]*\))?[;,]\s*`), ''); // "default 5000; 0 = unlimited"
  t = t.replace(/\s*\((?:default|Default) [^()]*\)/g, ''); // "(default 64)"
  t = t.replace(new RegExp(String.raw`[,;]\s*[Dd]efault ${v}(?=[;.]?$|[;,])`, 'g'), ''); // ", default 3" / "; default 500."
  t = t.replace(/(^|\.\s+)Default [^\s.]+\.$/, '$1'); // a last sentence "Default 10000."
  t = t.replace(/^\d+\.\.\d+$/, '').trim(); // only a range, which the accepts column gives
  if (t === '') return '';
  return t.charAt(0).toUpperCase() + t.slice(1);
}

// ---- the page -----------------------------------------------------------------------------------

const cell = (s) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
const anchor = (heading) => heading.toLowerCase().replace(/[^a-z0-9 -]/g, '').replace(/ /g, '-');

function render() {
  const rows = settings();
  const rowPaths = new Set(rows.map((r) => r.path));
  const { byPath: flags, other: otherFlags } = flagPaths(rowPaths);
  const extraEnv = new Map();
  for (const e of EXTRA_ENV) if (e.name !== envName(e.path)) extraEnv.set(e.path, e.name);
  const scopes = readFieldComments();

  // Top-level settings without sub-rows share a section; every other top-level key has its own.
  const top = (p) => p.split(/[.[]/)[0];
  const grouped = new Set(rows.filter((r) => r.path !== top(r.path)).map((r) => top(r.path)));
  const sections = new Map([['Top-level settings', []]]);
  for (const r of rows) {
    const g = grouped.has(top(r.path)) ? top(r.path) : 'Top-level settings';
    if (!sections.has(g)) sections.set(g, []);
    sections.get(g).push(r);
  }

  const out = [];
  out.push('# Configuration reference');
  out.push('');
  out.push('Every setting of respool: what it accepts, its default, its environment variable and its flag.');
  out.push('');
  out.push('<!-- Generated by scripts/gen-config-doc.mjs from src/config (schema, defaults, flags, comments):');
  out.push('     do not edit by hand; run `npm run docs:config`. test/unit/config-doc.test.ts checks it. -->');
  out.push('');
  out.push('- [Where settings come from](#where-settings-come-from)');
  out.push(`- Settings: ${[...sections.keys()].map((g) => `[${g === 'Top-level settings' ? 'top level' : code(g)}](#${anchor(g)})`).join(', ')}`);
  out.push('- [Flags that are not settings](#flags-that-are-not-settings)');
  out.push('');
  out.push('## Where settings come from');
  out.push('');
  out.push('Precedence: **flags > environment > config file > defaults**. A setting left out everywhere takes');
  out.push('its default. A bad flag, variable or file field is an error naming it, and respool exits with code 2.');
  out.push('');
  out.push('- **Config file** (`--config file.yaml`): the paths below, in YAML (`limits.maxMemory` is');
  out.push('  `maxMemory:` under `limits:`). Unknown keys are errors. [`config/sidecar.yaml`](../config/sidecar.yaml)');
  out.push('  and [`config/central-proxy.yaml`](../config/central-proxy.yaml) are commented examples of every setting.');
  out.push('- **Environment**: `RESPOOL_` + the path, each camelCase word in UPPER_SNAKE_CASE, levels joined by `_`');
  out.push('  (`timeouts.commandMs` is `RESPOOL_TIMEOUTS_COMMAND_MS`). Values are written as in the file');
  out.push('  (`5s`, `64mb`, `cluster`), lists as `a:1,b:2` or a YAML flow list, `null` as `null`.');
  out.push('- **Flags**: `respool --help` lists every flag with its default. Not every setting has a flag.');
  out.push('- SIGHUP reads the file, the environment and the flags again: see [operations.md](operations.md#reload-sighup)');
  out.push('  for which settings apply at once and which need a restart.');
  out.push('');
  out.push('Sizes are bytes, or with a unit as in valkey.conf: `64kb`, `512mb`, `1gb` (powers of 1024), `1k`, `1m`, `1g`');
  out.push('(powers of 1000). Durations are milliseconds, or with a unit: `200ms`, `5s`, `2m`, `1h`. A default of');
  out.push('— means the setting is unset unless given; rows `x[].field` are the fields of each entry of the list `x`.');
  for (const [g, list] of sections) {
    out.push('');
    out.push(`## ${g}`);
    out.push('');
    if (GROUP_PAGE[g]) {
      out.push(`See [${GROUP_PAGE[g].replace(/#.*$/, '')}](${GROUP_PAGE[g]}) for how these settings behave.`);
      out.push('');
    }
    out.push('| setting | accepts | default | environment | flag | description |');
    out.push('| --- | --- | --- | --- | --- | --- |');
    for (const r of list) {
      const env = r.item ? `in ${code(envName(r.path.split('[]')[0]))}` : [envName(r.path), extraEnv.get(r.path)].filter(Boolean).map(code).join(', ');
      const flag = (flags.get(r.path) ?? []).map((n) => code(`--${n}`)).join(', ') || '—';
      out.push(`| ${code(r.path)} | ${cell(accepts(r))} | ${cell(defaultOf(r))} | ${env} | ${flag} | ${cell(describe(scopes, r.path))} |`);
    }
  }
  out.push('');
  out.push('## Flags that are not settings');
  out.push('');
  out.push('| flag | what it does |');
  out.push('| --- | --- |');
  for (const f of otherFlags) {
    const names = `${f.short ? `${code(`-${f.short}`)}, ` : ''}${code(`--${f.name}${f.value ? ` ${f.value}` : ''}`)}`;
    out.push(`| ${cell(names)} | ${cell(f.help)} |`);
  }
  out.push('');
  return out.join('\n');
}

// ---- write or check -----------------------------------------------------------------------------

const text = render();
if (process.argv.includes('--check')) {
  let disk = '';
  try {
    disk = readFileSync(OUT, 'utf8');
  } catch {
    disk = '';
  }
  if (disk !== text) {
    const a = disk.split('\n');
    const b = text.split('\n');
    let i = 0;
    while (i < a.length && i < b.length && a[i] === b[i]) i++;
    console.error(`docs/configuration.md is stale: run npm run docs:config (first difference at line ${i + 1})`);
    console.error(`  on disk:   ${a[i] ?? '(end of file)'}`);
    console.error(`  generated: ${b[i] ?? '(end of file)'}`);
    process.exit(1);
  }
  console.log('docs/configuration.md is up to date');
} else {
  writeFileSync(OUT, text);
  console.log(`wrote ${path.relative(root, OUT)}`);
}
