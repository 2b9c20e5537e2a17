// bench/soak.mjs's report: every error, lost write, missing item or message placed by its time
// inside a fault's window (the fault's start to its end + the settle margin) or outside every
// window; the tables (printed, and the section of bench/RESULTS.md); the charts over the run
// (bench/charts/soak-*.svg, faults marked by their number in the fault log). A lost write, a
// missing item or message is placed by the time it was acknowledged, with a lead of IN_FLIGHT_MS:
// acknowledged that shortly before a fault, it may still have been on its way when it began (a
// message to a subscriber whose connection the fault closed).
import { fmt, fmtInt, mdTable, median } from './common.mjs';
import { MODES } from './soak-ledger.mjs';
import { lineCharts, writeChart } from './svg-chart.mjs';

const MB = 1024 * 1024;
const IN_FLIGHT_MS = 1000;

/** Index of the fault whose window holds epoch-ms `t`, or -1. */
function windowOf(faults, settleMs, t, leadMs = 0) {
  return faults.findIndex((f) => t >= f.start - leadMs && t <= f.end + settleMs);
}

/** Acknowledgement times → how many fall inside a window (IN_FLIGHT_MS before its start included). */
function split(faults, settleMs, times) {
  let inside = 0;
  for (const t of times) if (windowOf(faults, settleMs, t, IN_FLIGHT_MS) >= 0) inside++;
  return { inside, outside: times.length - inside };
}

/** Medians of a sample field over the first, middle and last `w` seconds of the run. */
function phases(samples, durationS, w, pick) {
  const at = (from, to) => median(samples.filter((s) => s.t >= from && s.t <= to).map(pick));
  return [at(0, w), at(durationS / 2 - w / 2, durationS / 2 + w / 2), at(durationS - w, durationS)];
}

function charts(run, marks) {
  const { samples, progress, fleetNames } = run;
  const x = (t) => t / 60;
  const memberSeries = (pick, suffix = '') => fleetNames.map((name) => ({ name: `${name}${suffix}`, points: samples.map((s) => [x(s.t), pick(s.members[name])]) }));
  const chart = (file, title, yLabel, series, alt) =>
    writeChart(file, lineCharts({ title, xLabel: 'minutes', panels: [{ yLabel, series, marks }], width: 820, panelHeight: 200 }), alt);
  const rates = [];
  for (let i = 1; i < progress.length; i++) {
    const [a, b] = [progress[i - 1], progress[i]];
    const dt = (b.t - a.t) / 1000;
    const sum = (o) => MODES.reduce((n, m) => n + o[m], 0);
    rates.push([x((b.t - run.t0) / 1000), (sum(b.ops) - sum(a.ops)) / dt, (sum(b.errors) - sum(a.errors)) / dt]);
  }
  return [
    chart('soak-rss', 'respool resident memory (member A: supervisor + 2 workers)', 'RSS (MB)', memberSeries((m) => m.rss / MB), 'RSS over the soak'),
    chart('soak-fds', 'respool open file descriptors', 'descriptors', memberSeries((m) => m.fds), 'descriptors over the soak'),
    chart('soak-upstream', 'client connections on the cluster\'s nodes (all respool\'s)', 'connections',
      [{ name: 'upstream connections', points: samples.map((s) => [x(s.t), s.upstreamConns]) }], 'upstream connections over the soak'),
    chart('soak-loop-delay', 'event-loop delay per scrape (prom-client)', 'ms',
      [...memberSeries((m) => m.lagP99Ms, ' p99'), ...memberSeries((m) => m.lagMaxMs, ' max')], 'event-loop delay over the soak'),
    chart('soak-load', 'load: requests and errors per second', 'per second',
      [{ name: 'requests/s', points: rates.map(([t, r]) => [t, r]) }, { name: 'errors/s', points: rates.map(([t, , e]) => [t, e]) }], 'load over the soak'),
  ];
}

/** → { table (printed), markdown (the RESULTS.md section) }. */
export function buildReport(run) {
  const { config, faults, samples, result, t0, durationS } = run;
  const settleMs = config.settleS * 1000;
  const errs = result.errors;
  const inWindow = faults.map(() => 0);
  const perMode = Object.fromEntries(MODES.map((m) => [m, { inside: 0, outside: 0 }]));
  const outside = [];
  for (const [t, mode, kind] of errs) {
    const w = windowOf(faults, settleMs, t);
    if (w >= 0) {
      inWindow[w]++;
      perMode[mode].inside++;
    } else {
      perMode[mode].outside++;
      outside.push({ t, mode, kind });
    }
  }
  const kept = errs.length < MODES.reduce((n, m) => n + result.errorCount[m], 0) ? ' (of the first errors kept)' : '';
  const rb = result.readBack;
  const items = result.items;
  const msgs = result.messages;
  const lostSplit = split(faults, settleMs, rb.lostAt);
  const itemSplit = split(faults, settleMs, items.missingAt);
  const msgSplit = split(faults, settleMs, msgs.missingAt);
  const mismatchedRun = MODES.reduce((n, m) => n + result.mismatchCount[m], 0);
  const requests = (m) => result.ops[m] + result.errorCount[m];
  const totalRequests = MODES.reduce((n, m) => n + requests(m), 0);
  const w = Math.min(300, durationS / 4);
  const ph = (pick, f = (v) => fmt(v, 1)) => phases(samples, durationS, w, pick).map(f).join(' / ');
  const names = run.fleetNames;
  const byName = (sample) => {
    const out = {};
    for (const counts of Object.values(sample?.namesByNode ?? {})) for (const [k, v] of Object.entries(counts)) out[k] = (out[k] ?? 0) + v;
    return out;
  };
  const [firstNames, lastNames] = [byName(samples[0]), byName(samples.at(-1))];
  const namesLine = [...new Set([...Object.keys(firstNames), ...Object.keys(lastNames)])].sort()
    .map((k) => `${k} ${firstNames[k] ?? 0} → ${lastNames[k] ?? 0}`).join(', ');
  const errorsInside = inWindow.reduce((a, b) => a + b, 0);

  const summary = mdTable(['', 'value'], [
    ['duration', `${fmt(durationS / 60, 1)} min, ${faults.length} faults (one every ${config.faultEveryS} s), settle margin ${config.settleS} s`],
    ['requests', `${fmtInt(totalRequests)} (${fmtInt(totalRequests / durationS)}/s)`],
    ['errors inside fault windows', fmtInt(errorsInside) + kept],
    ['errors outside fault windows', fmtInt(outside.length) + kept],
    ['acknowledged writes read back', fmtInt(rb.checked + rb.unreadable)],
    ['lost', `${fmtInt(rb.lost + rb.unreadable)}${rb.unreadable ? ` (${rb.unreadable} unreadable)` : ''}${rb.lost ? ` — acknowledged inside windows ${lostSplit.inside}, outside ${lostSplit.outside}` : ''}`],
    ['mismatched', `${fmtInt(rb.mismatched + mismatchedRun)} (${rb.mismatched} at the read-back, ${mismatchedRun} during the run)`],
    ['BLPOP items', `${fmtInt(items.pushed)} acknowledged pushes: ${fmtInt(items.poppedOnce)} popped exactly once, ${items.missing} never popped (${itemSplit.inside} pushed inside windows, ${itemSplit.outside} outside), ${items.duplicated} popped twice; ${items.fromFailedPush} popped from pushes that had failed; ${items.leftInQueues} left in the queues`],
    ['pub/sub messages', `${fmtInt(msgs.published)} acknowledged × ${msgs.subscribers} subscribers: ${fmtInt(msgs.delivered)} delivered, ${msgs.missing} missing (${msgSplit.inside} published inside windows, ${msgSplit.outside} outside), ${msgs.duplicated} duplicated`],
    ...names.map((n) => [`RSS ${n} (MB): start / middle / end`, ph((s) => s.members[n].rss / MB)]),
    ...names.map((n) => [`descriptors ${n}: start / middle / end`, ph((s) => s.members[n].fds, (v) => fmt(v, 0))]),
    ['upstream connections: start / middle / end', ph((s) => s.upstreamConns, (v) => fmt(v, 0))],
    ['upstream connections by client name: first → last sample', namesLine],
    ...names.map((n) => [`event-loop delay p99 ${n} (ms): start / middle / end`, ph((s) => s.members[n].lagP99Ms, (v) => fmt(v, 2))]),
  ], ['l', 'l']);
  const modes = mdTable(['session', 'requests', 'errors inside windows', 'errors outside', 'mismatched'],
    MODES.map((m) => [m, fmtInt(requests(m)), fmtInt(perMode[m].inside), fmtInt(perMode[m].outside), fmtInt(result.mismatchCount[m])]));
  const rel = (t) => fmt((t - t0) / 1000, 0);
  const log = mdTable(['#', 'fault', 'start (s)', 'end (s)', 'errors in window', 'what happened'],
    faults.map((f, i) => [i + 1, f.name, rel(f.start), rel(f.end), fmtInt(inWindow[i]), f.error ? `**failed**: ${f.error}` : f.detail]), ['r', 'l', 'r', 'r', 'r', 'l']);
  const outsideKinds = {};
  for (const e of outside) outsideKinds[`${e.mode}: ${e.kind}`] = (outsideKinds[`${e.mode}: ${e.kind}`] ?? []).concat(rel(e.t));
  const outsideLines = Object.entries(outsideKinds).map(([k, ts]) => `- \`${k}\` ×${ts.length} at s ${ts.slice(0, 12).join(', ')}${ts.length > 12 ? ', …' : ''}`);
  const examples = [...rb.examples, ...result.mismatches.map((m) => `${m.mode} at s ${rel(m.at)}: ${m.detail}`)];
  const table = [summary, '', modes, '', log].join('\n');

  const md = [
    '## Soak: an hour of chaos (issue 34)',
    '',
    `**Rerun:** \`npm run bench:soak\` (env: SOAK_MINUTES=${config.minutes}, SOAK_FAULT_EVERY_S=${config.faultEveryS}, ` +
      `SOAK_SAMPLE_S=${config.sampleS}, SOAK_SETTLE_S=${config.settleS}, SOAK_RATE=${config.rate}). A 3+3 valkey cluster ` +
      `(cluster-node-timeout ${config.nodeTimeoutMs} ms, cluster-require-full-coverage no; the first shard's primary behind a fault relay), ` +
      'two respool processes as a fleet — A: `' + run.commands[0] + '`, B: `' + run.commands[1] + '` — and, spread over both, ' +
      'verified SET/GET, MULTI across slots, BLPOP workers fed by LPUSH, pub/sub, cross-slot MGET and a connection per request ' +
      '(iovalkey, no client retry). A fault every interval, in turn: primary killed, primary frozen, reshard, node added and removed, ' +
      'member B restarted, takeover on A, slow link. An error is "inside" when it falls between a fault\'s start and its end + the settle margin; ' +
      `a lost write, item or message when it was acknowledged in that window or up to ${IN_FLIGHT_MS} ms before it (still in flight when the fault began).`,
    '',
    summary,
    '',
    'Requests by session (a transaction, an MGET, a connection per request each count as one):',
    '',
    modes,
    '',
    'Fault log (the numbers mark the charts):',
    '',
    log,
    '',
    ...charts(run, faults.map((f, i) => ({ x: (f.start - t0) / 60_000, label: String(i + 1) }))).flatMap((c) => [c, '']),
    outsideLines.length ? 'Errors outside every fault window:' : 'No error outside the fault windows.',
    ...(outsideLines.length ? ['', ...outsideLines.slice(0, 20)] : []),
    ...(examples.length ? ['', 'Lost or mismatched values:', '', ...examples.slice(0, 20).map((e) => `- ${e}`)] : []),
    '',
    `RSS, descriptors, connections and loop delay are medians over the first, middle and last ${fmt(w / 60, 1)} min; samples every ${config.sampleS} s. ` +
      'Upstream connections: CLIENT LIST summed over the nodes (respool\'s links to primaries and replicas, its leases, watch and ' +
      'pub/sub connections). Loop delay: prom-client\'s monitor at 10 ms resolution (an idle loop reads ~10–11 ms). ' +
      'Requests per second dip during a fault because each session is a closed loop (a request to a frozen or distant node holds its session) ' +
      'and pauses 100 ms after an error. ' +
      `Measured ${new Date().toISOString()}.`,
  ].join('\n');
  return { table, md, outsideLines, examples };
}
