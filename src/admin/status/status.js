// respool's status page: polls the admin port's own JSON (relative URLs only, so the page never
// asks any other address) and draws tables with textContent (key names are the application's
// data, never markup). Read-only; with an admin token typed in, hot keys can be split and split
// keys removed (POST / DELETE /hotkeys/split, which the admin server checks). A token typed in is
// also sent with every read, for an admin port that has admin.readToken set.
'use strict';

const POLL_MS = Number(new URLSearchParams(location.search).get('interval')) || 2000;
const TOKEN_KEY = 'respool-admin-token';

/** The admin token from this tab's storage ('' when none). */
function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

/** GET a JSON endpoint of this admin port (with the token typed in, if any: admin.readToken protects them); null for 404. */
async function getJson(path) {
  const t = token();
  const res = await fetch(path, { cache: 'no-store', ...(t === '' ? {} : { headers: { authorization: `Bearer ${t}` } }) });
  if (res.status === 404) return null;
  if (res.status === 401) throw new Error(`${path}: this admin port needs its read token (admin.readToken) or the admin token: type it above`);
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k === 'title') e.title = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

/** A table: columns are [header, cell(row) → text or Node, class?]. */
function table(columns, rows, rowClass) {
  const head = el('tr', {}, ...columns.map(([h, , cls]) => el('th', { class: cls || '' }, h)));
  const body = rows.map((r) => el('tr', { class: rowClass ? rowClass(r) : '' }, ...columns.map(([, cell, cls]) => el('td', { class: cls || '' }, cell(r)))));
  return el('table', {}, el('thead', {}, head), el('tbody', {}, ...body));
}

function show(id, node) {
  const box = document.getElementById(id);
  box.replaceChildren(node);
}

function empty(text) {
  return el('p', { class: 'muted' }, text);
}

const us = (v) => (v >= 1000 ? `${(v / 1000).toFixed(v >= 100000 ? 0 : 1)} ms` : `${Math.round(v)} µs`);
const rate = (v) => (v >= 1000 ? `${(v / 1000).toFixed(1)}k/s` : `${v.toFixed(v >= 10 ? 0 : 1)}/s`);
const pct = (v) => `${(v * 100).toFixed(1)}%`;
const bytes = (n) => (n >= 1048576 ? `${(n / 1048576).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);
const time = (ms) => new Date(ms).toLocaleTimeString();

function shareBar(share) {
  const bar = el('span', { class: 'bar' });
  bar.style.width = `${Math.round(share * 80)}px`; // CSSOM, which the page's CSP allows (no inline styles)
  return el('span', {}, bar, pct(share));
}

function renderNodes(nodes, latency, saturation) {
  if (nodes === null || nodes.nodes.length === 0) return show('nodes', empty('no topology yet'));
  const lat = new Map((latency ? latency.nodes : []).map((n) => [n.name, n]));
  const sat = new Map((saturation ? saturation.nodes : []).map((n) => [n.node, n]));
  const total = [...lat.values()].reduce((a, n) => a + n.perSecond, 0);
  const rows = nodes.nodes.map((n) => ({ ...n, lat: lat.get(n.address), sat: sat.get(n.address) }));
  show('nodes', table([
    ['shard', (r) => (r.role === 'primary' ? `#${r.shard}` : '')],
    ['node', (r) => r.address],
    ['role', (r) => r.role],
    ['zone', (r) => r.zone || '—'],
    ['slots', (r) => (r.role === 'primary' ? r.slots : ''), 'num'],
    ['share', (r) => shareBar(total > 0 && r.lat ? r.lat.perSecond / total : 0)],
    ['req/s', (r) => (r.lat ? rate(r.lat.perSecond) : '—'), 'num'],
    ['p50', (r) => (r.lat && r.lat.calls > 0 ? us(r.lat.p50Us) : '—'), 'num'],
    ['p99', (r) => (r.lat && r.lat.calls > 0 ? us(r.lat.p99Us) : '—'), 'num'],
    ['cpu', (r) => (r.sat && r.sat.cpu !== null ? pct(r.sat.cpu) : '—'), 'num'],
    ['saturated', (r) => (r.sat && r.sat.saturated ? el('span', { class: 'bad' }, `yes (${r.sat.reasons.join(', ')})`) : el('span', { class: 'ok' }, 'no'))],
    ['links', (r) => r.links, 'num'],
    ['leases · parked', (r) => `${r.leases.inUse} in use, ${r.leases.idle} idle${r.leases.waiting > 0 ? `, ${r.leases.waiting} waiting` : ''}${r.parked && (r.parked.clients > 0 || r.parked.watch) ? ` · ${r.parked.clients} parked` : ''}`],
    ['circuit', (r) => el('span', { class: r.circuit === 'closed' ? 'ok' : 'bad' }, r.circuit)],
    ['health', (r) => el('span', { class: r.health === 'online' ? '' : 'bad' }, r.health)],
  ], rows, (r) => (r.role === 'primary' ? 'shard' : '')));
}

function renderFamilies(latency) {
  const rows = latency ? latency.families.filter((f) => f.calls > 0) : [];
  if (rows.length === 0) return show('families', empty('no requests in the last minute'));
  show('families', table([
    ['family', (f) => f.name],
    ['calls', (f) => f.calls, 'num'],
    ['req/s', (f) => rate(f.perSecond), 'num'],
    ['p50', (f) => us(f.p50Us), 'num'],
    ['p99', (f) => us(f.p99Us), 'num'],
    ['p99.9', (f) => us(f.p999Us), 'num'],
  ], rows));
}

async function mutate(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${token()}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) alert(`${method} ${path}: ${(await res.json().catch(() => ({}))).error || res.status}`);
  void poll();
}

function renderHotKeys(hot) {
  if (hot === null || !hot.detection.enabled) {
    show('hotkeys', empty('hot-key detection is off'));
    show('splitkeys', empty(''));
    return;
  }
  const window = hot.lastWindow || hot.currentWindow;
  document.getElementById('hotkeys-window').textContent = hot.lastWindow ? `last ${Math.round((window.endedAt - window.startedAt) / 1000)} s window` : 'current window';
  const admin = token() !== '';
  const split = new Set(hot.split.keys.map((k) => k.key));
  const keys = window ? window.topKeys : [];
  show('hotkeys', keys.length === 0 ? empty('no sampled keys yet') : table([
    ['key', (k) => k.key, 'wrap'],
    ['req/s', (k) => rate(k.requestsPerSecond), 'num'],
    ['share', (k) => shareBar(k.share)],
    ['node', (k) => k.node],
    ['split', (k) => (split.has(k.key) ? 'yes' : admin ? el('button', { onclick: () => mutate('POST', '/hotkeys/split', { key: k.key }) }, 'split') : 'no')],
  ], keys));
  show('splitkeys', hot.split.keys.length === 0 ? empty('none') : table([
    ['key', (s) => s.key, 'wrap'],
    ['copies', (s) => s.copies.map((c) => c.node).join(', '), 'wrap'],
    ['', (s) => (admin && s.rule.key !== undefined ? el('button', { onclick: () => mutate('DELETE', `/hotkeys/split?key=${encodeURIComponent(s.rule.key)}`) }, 'unsplit') : '')],
  ], hot.split.keys));
}

function renderBigKeys(big) {
  if (big === null || !big.enabled) return show('bigkeys', empty('big keys are off'));
  show('bigkeys', big.keys.length === 0 ? empty('no sampled keys yet') : table([
    ['key', (k) => k.key, 'wrap'],
    ['bytes', (k) => bytes(k.bytes), 'num'],
    ['largest', (k) => bytes(k.maxBytes), 'num'],
    ['command', (k) => k.command],
    ['node', (k) => k.node],
  ], big.keys));
}

function renderSlowlog(slow) {
  if (slow === null) return show('slowlog', empty('no slow log here'));
  document.getElementById('slowlog-len').textContent = `${slow.length} entries · newest first`;
  show('slowlog', slow.entries.length === 0 ? empty('no request was slow') : table([
    ['time', (e) => time(e.time * 1000)],
    ['duration', (e) => us(e.durationUs), 'num'],
    ['at the node', (e) => us(e.nodeUs), 'num'],
    ['at respool', (e) => us(e.respoolUs), 'num'],
    ['node', (e) => e.node || 'respool'],
    ['command', (e) => e.command.join(' '), 'wrap'],
    ['client', (e) => (e.clientName ? `${e.client} (${e.clientName})` : e.client)],
  ], slow.entries));
}

function renderEvents(events) {
  const list = events ? events.events.slice(-15).reverse() : [];
  show('events', list.length === 0 ? empty('nothing happened lately') : table([
    ['time', (e) => time(e.at)],
    ['event', (e) => el('span', { class: e.level === 'warn' || e.level === 'error' ? 'warn' : '' }, e.event)],
    ['', (e) => e.message, 'wrap'],
  ], list));
}

const ago = (ms) => (ms === null || ms === undefined ? '—' : ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`);

/** The fleet's members (GET /fleet), with headers in words; a long id and slot list wrap rather than widen the page. */
function renderFleet(fleet) {
  const section = document.getElementById('fleet-section');
  section.hidden = fleet === null;
  if (fleet === null) return;
  const members = Array.isArray(fleet.members) ? fleet.members : [];
  if (members.length === 0) return show('fleet', empty('no members'));
  show('fleet', table([
    ['member', (m) => (m.self ? `${m.address} (this one)` : m.address)],
    ['id', (m) => el('span', { title: m.id }, String(m.id).slice(0, 8))],
    ['state', (m) => el('span', { class: m.state === 'alive' ? 'ok' : m.state === 'fail' ? 'bad' : 'warn' }, m.state)],
    ['last seen', (m) => ago(m.lastSeenMsAgo)],
    ['in this state for', (m) => ago(m.stateForMs)],
    ['slots', (m) => m.slots, 'num'],
    ['slot ranges', (m) => m.slotRanges, 'wrap'],
    ['shared state version', (m) => (m.version === null ? '—' : m.version), 'num'],
    ['last error', (m) => m.lastError || '—', 'wrap'],
  ], members));
}

/** The tenants (GET /tenants): hidden without any; a limit of null is none. */
function renderCache(cache) {
  const on = cache !== null && cache.configured === true;
  document.getElementById('cache-section').hidden = !on;
  if (!on) return;
  document.getElementById('cache-summary').textContent = `${cache.entries} ${cache.entries === 1 ? 'entry' : 'entries'} · ${bytes(cache.bytes)} of ${bytes(cache.max_bytes)} · ` +
    `hit ratio ${pct(cache.hit_ratio)} · ${cache.fills} fills · ${cache.coalesced} coalesced · ${cache.invalidations} invalidations · ${cache.evictions} evicted`;
  show('cache', cache.keys.length === 0 ? empty('nothing cached yet') : table([
    ['key', (k) => k.key, 'wrap'],
    ['bytes', (k) => bytes(k.bytes), 'num'],
    ['node', (k) => k.node],
  ], cache.keys));
}

/** A live migration (GET /migration): hidden while none ran. */
function renderMigration(m) {
  const on = m !== null && m.state !== 'idle';
  document.getElementById('migration-section').hidden = !on;
  if (!on) return;
  document.getElementById('migration-summary').textContent = `${m.state} → ${m.target}` + (m.reason ? ` · ${m.reason}` : '');
  show('migration', table([
    ['keys copied', (x) => x.copied, 'num'],
    ['scans done', (x) => `${x.scans_done} of ${x.scans}`, 'num'],
    ['bytes', (x) => bytes(x.bytes), 'num'],
    // The scan's pace now, and the clients' p99 the latency guard holds it to (before START → now).
    ['pace', (x) => `${x.pace_keys_per_second} keys/s` + (x.pace_guard === 'on' ? ` · p99 ${x.clients_p99_before_us} → ${x.clients_p99_us} µs` : ` · guard ${x.pace_guard}`), 'wrap'],
    ['writes carried', (x) => x.mirrored, 'num'],
    ['copied again', (x) => x.recopied, 'num'],
    ['verified', (x) => x.verified, 'num'],
    ['different', (x) => x.mismatched, 'num'],
    ['writes past respool /s', (x) => x.unseen_writes_per_second, 'num'],
    ['cutover pause', (x) => (x.cutover_pause_ms === null ? '—' : `${x.cutover_pause_ms} ms`), 'num'],
  ], [m]));
}

function renderTenants(tenants) {
  const list = tenants === null || !Array.isArray(tenants.tenants) ? [] : tenants.tenants;
  document.getElementById('tenants-section').hidden = list.length === 0;
  if (list.length === 0) return;
  const limit = (v, unit) => (v === null || v === undefined ? 'none' : `${v}${unit}`);
  show('tenants', table([
    ['tenant', (t) => t.name],
    ['namespace · upstreams', (t) => `${t.keyPrefix || '—'} · ${Array.isArray(t.upstreams) ? t.upstreams.join(', ') : 'main'}`, 'wrap'],
    ['clients', (t) => `${t.clients} of ${limit(t.limits.maxClients, '')}`, 'num'],
    ['replies owed', (t) => `${t.inflight} of ${limit(t.limits.maxInflight, '')}`, 'num'],
    ['held now', (t) => t.heldClients, 'num'],
    ['requests', (t) => t.requests, 'num'],
    ['in / out', (t) => `${bytes(t.bytesIn)} / ${bytes(t.bytesOut)}`, 'num'],
    ['rate limits', (t) => `${limit(t.limits.opsPerSecond, '/s')} · ${t.limits.bytesPerSecond === null ? 'none' : `${bytes(t.limits.bytesPerSecond)}/s`}`, 'wrap'],
    ['holds: rate, bytes, replies, share', (t) => `${t.held.ops}, ${t.held.bytes}, ${t.held.inflight}, ${t.held.share}${t.held.shed ? `; slowed ${t.held.shed}` : ''}${t.shed ? ` (now to ${Math.round(t.shed.opsPerSecond)}/s: ${t.shed.why})` : ''}`, 'wrap'],
    ['time held', (t) => ago(Math.round(t.heldMs)), 'num'],
    ['p50 / p99', (t) => (t.latencyUs ? `${(t.latencyUs.p50 / 1000).toFixed(2)} / ${(t.latencyUs.p99 / 1000).toFixed(2)} ms` : '—'), 'num'],
    ['refused', (t) => t.refusedClients, 'num'],
  ], list, (t) => (t.heldClients > 0 ? 'warn' : '')));
}

/** What respool holds for its clients (GET /clients): limits.maxMemory, bytes per lane class, the lanes, the clients holding the most. */
function renderClients(clients) {
  if (clients === null) return show('buffers', empty('no client data'));
  const m = clients.memory;
  document.getElementById('clients-memory').textContent = m.limit > 0
    ? `limits.maxMemory ${bytes(m.limit)} · ${bytes(m.total)} buffered (${pct(m.total / m.limit)})`
    : `limits.maxMemory off · ${bytes(m.total)} buffered`;
  const classes = ['interactive', 'bulk'].map((c) => ({ c, clients: clients.classes[c], output: m.output[c], requests: m.requests[c] }));
  classes.push({ c: 'links', clients: '', output: m.links, requests: '' });
  const lanes = new Map(clients.lanes.map((l) => [l.node, l]));
  show('buffers', el('div', { class: 'columns' },
    table([
      ['class', (r) => r.c],
      ['clients', (r) => r.clients, 'num'],
      ['output (unread + coming)', (r) => bytes(r.output), 'num'],
      ['queued requests', (r) => (r.requests === '' ? '' : bytes(r.requests)), 'num'],
    ], classes),
    lanes.size === 0 ? empty('no links') : table([
      ['node', (l) => l.node],
      ['in flight, interactive links', (l) => l.interactive, 'num'],
      ['in flight, bulk links', (l) => l.bulk, 'num'],
    ], [...lanes.values()])));
  const columns = [
    ['client', (r) => r.address],
    ['id', (r) => r.id, 'num'],
    ['name', (r) => r.name || '—'],
    ['class', (r) => r.class],
    ['owed', (r) => r.pending, 'num'],
    ['output', (r) => bytes(r.outputBytes), 'num'],
    ['queued', (r) => bytes(r.queryBytes), 'num'],
  ];
  show('clients-inflight', clients.inflight.length === 0 ? empty('none owed') : table(columns, clients.inflight));
  show('clients-output', clients.output.length === 0 ? empty('none held') : table(columns, clients.output));
}

function renderSummary(topology, saturation) {
  const t = topology && topology.topology;
  const parts = [];
  if (t) parts.push(`${t.mode}, ${t.shards.length} shard${t.shards.length === 1 ? '' : 's'}, ${t.coveredSlots} slots covered`);
  else parts.push('topology not known yet');
  if (topology) parts.push(`${topology.clients} client${topology.clients === 1 ? '' : 's'}`);
  if (saturation) parts.push(`${pct(saturation.ratio)} of nodes saturated`);
  document.getElementById('summary').textContent = parts.join(' · ');
}

const SOURCES = {
  topology: '/topology', nodes: '/nodes', latency: '/latency', saturation: '/saturation', clients: '/clients', hot: '/hotkeys',
  big: '/bigkeys', slow: '/slowlog?count=10', events: '/events', fleet: '/fleet', tenants: '/tenants', cache: '/cache?count=10', migration: '/migration',
};

let polling = false;

async function poll() {
  if (polling) return;
  polling = true;
  try {
    const names = Object.keys(SOURCES);
    const results = await Promise.allSettled(names.map((n) => getJson(SOURCES[n])));
    const d = {};
    const failed = [];
    names.forEach((n, i) => {
      if (results[i].status === 'fulfilled') d[n] = results[i].value;
      else {
        d[n] = null;
        failed.push(n === 'fleet' ? null : results[i].reason.message);
      }
    });
    renderSummary(d.topology, d.saturation);
    renderNodes(d.nodes, d.latency, d.saturation);
    renderFamilies(d.latency);
    renderClients(d.clients);
    renderHotKeys(d.hot);
    renderBigKeys(d.big);
    renderSlowlog(d.slow);
    renderEvents(d.events);
    renderFleet(d.fleet);
    renderTenants(d.tenants);
    renderCache(d.cache);
    renderMigration(d.migration);
    const errors = failed.filter((f) => f !== null);
    const updated = document.getElementById('updated');
    updated.textContent = errors.length > 0 ? `errors: ${errors.join('; ')}` : `updated ${new Date().toLocaleTimeString()}`;
    updated.className = errors.length > 0 ? 'error' : 'muted';
  } finally {
    polling = false;
  }
}

function showMode() {
  const admin = token() !== '';
  const mode = document.getElementById('mode');
  mode.textContent = admin ? 'admin' : 'read-only';
  mode.className = admin ? 'badge warn' : 'badge';
}

document.getElementById('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const value = document.getElementById('token').value.trim();
  try {
    if (value === '') sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, value);
  } catch {
    /* storage refused: stay read-only */
  }
  document.getElementById('token').value = '';
  showMode();
  void poll();
});

showMode();
void poll();
setInterval(poll, POLL_MS);
