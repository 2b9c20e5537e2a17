// The deployment files under deploy/ and the Dockerfile, checked against respool itself:
// - deploy/kubernetes/*.yaml: every document parses and has apiVersion, kind, metadata.name;
//   every container an image; respool's containers ports, /readyz and /healthz probes on the
//   admin port, no CPU limit, a non-root read-only securityContext; and their command line
//   (the image's ENTRYPOINT and ENV + the container's `args` and `env`, with the ConfigMap
//   mounted as the config file) is one respool accepts (parseCommandLine), so every flag,
//   RESPOOL_* variable and config key is real.
// - deploy/grafana/respool.json and deploy/prometheus/alerts.yml: every PromQL expression uses
//   only metric names respool exports (a Metrics registry built here, prom-client's default
//   process_* / nodejs_* metrics included) or the PENDING ones below, with labels those
//   metrics have.
// - Dockerfile: Node 22 base, non-root USER, HEALTHCHECK on the admin /healthz, EXPOSE 6380 9121,
//   an ENTRYPOINT respool accepts.
// `promtool check rules` / `promtool test rules` run in scripts/check-deploy.sh (CI).

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';

import { METRIC_DEFINITIONS, METRIC_PREFIX } from '../../src/metrics/metric-definitions.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { envSettings } from '../../src/config/env-config.js';
import { FLAGS } from '../../src/config/flags.js';
import { parseCommandLine, type RespoolConfig } from '../../src/config/load-config.js';

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'respool-deploy-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/**
 * Metrics the dashboard and alerts may use before respool exports them (work in progress
 * elsewhere), as name → type and labels. Each is accepted only while it is absent from
 * respool's registry; once a metric of that name is exported, its real labels are checked
 * instead. Empty now: respool_client_request_duration_seconds{family},
 * respool_client_bytes_total{direction}, respool_build_info{version,node_version} and
 * respool_config_last_reload_successful, once pending, are exported.
 */
const PENDING_METRICS: Record<string, { type: 'counter' | 'gauge' | 'histogram'; labels: string[] }> = {};

/** Labels every scraped series may carry (Prometheus adds them) besides a metric's own. */
const TARGET_LABELS = ['instance', 'job'];

// ---- helpers ----------------------------------------------------------------------------------

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const asArray = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

function filesUnder(dir: string, exts: string[]): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path, exts));
    else if (exts.some((e) => name.endsWith(e))) out.push(path);
  }
  return out;
}

interface Doc {
  file: string;
  obj: Obj;
}

function kubernetesDocs(): Doc[] {
  const docs: Doc[] = [];
  for (const file of filesUnder(join(repoRoot, 'deploy/kubernetes'), ['.yaml', '.yml'])) {
    for (const d of parseAllDocuments(readFileSync(file, 'utf8'))) {
      if (d.errors.length > 0) throw new Error(`${relative(repoRoot, file)}: ${d.errors.map((e) => e.message).join('; ')}`);
      const obj: unknown = d.toJS();
      if (obj === null || obj === undefined) continue; // an empty document (a leading ---)
      if (!isObj(obj)) throw new Error(`${relative(repoRoot, file)}: a document that is not a mapping`);
      docs.push({ file: relative(repoRoot, file), obj });
    }
  }
  return docs;
}

const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job']);

interface Container {
  doc: Doc;
  pod: Obj; // the pod spec
  podLabels: Obj;
  podAnnotations: Obj;
  c: Obj;
}

function containersOf(doc: Doc): Container[] {
  const template = (doc.obj['spec'] as Obj | undefined)?.['template'] as Obj | undefined;
  const pod = template?.['spec'] as Obj | undefined;
  if (!pod) return [];
  const meta = (template?.['metadata'] as Obj | undefined) ?? {};
  return [...asArray(pod['initContainers']), ...asArray(pod['containers'])].map((c) => ({
    doc,
    pod,
    podLabels: (meta['labels'] as Obj | undefined) ?? {},
    podAnnotations: (meta['annotations'] as Obj | undefined) ?? {},
    c: c as Obj,
  }));
}

const isRespoolImage = (c: Obj) => String(c['image'] ?? '').split('/').pop()!.startsWith('respool:');
const isRespool = (c: Container) => isRespoolImage(c.c);

/** A probe's or Service's port (number or a container port's name) as a number. */
function portNumber(c: Obj, port: unknown): number | undefined {
  if (typeof port === 'number') return port;
  const hit = asArray(c['ports']).find((p) => isObj(p) && p['name'] === port) as Obj | undefined;
  return hit?.['containerPort'] as number | undefined;
}

// ---- the Dockerfile ---------------------------------------------------------------------------

interface Instruction {
  op: string;
  args: string;
}

function dockerfile(): Instruction[] {
  const text = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
  const out: Instruction[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      pending += line.slice(0, -1) + ' ';
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    const m = /^(\w+)\s+(.*)$/s.exec(full);
    if (m) out.push({ op: m[1]!.toUpperCase(), args: m[2]!.trim() });
  }
  return out;
}

/** The image's ENTRYPOINT, exec form, without `node /app/bin/respool.js`. */
function entrypointFlags(): string[] {
  const ep = dockerfile().filter((i) => i.op === 'ENTRYPOINT').pop();
  if (!ep) throw new Error('Dockerfile: no ENTRYPOINT');
  const argv = JSON.parse(ep.args) as string[];
  const script = argv.findIndex((a) => a.endsWith('bin/respool.js'));
  if (script < 0) throw new Error(`Dockerfile: ENTRYPOINT does not run bin/respool.js: ${ep.args}`);
  return argv.slice(script + 1);
}

/** The final image's ENV (`ENV K=V K2=V2`, or the old `ENV K V`). */
function imageEnv(): Record<string, string> {
  const ins = dockerfile();
  const env: Record<string, string> = {};
  for (const i of ins.slice(ins.map((x) => x.op).lastIndexOf('FROM')).filter((x) => x.op === 'ENV')) {
    const words = i.args.split(/\s+/);
    if (!words[0]!.includes('=')) env[words[0]!] = words.slice(1).join(' ');
    else for (const w of words) env[w.slice(0, w.indexOf('='))] = w.slice(w.indexOf('=') + 1).replace(/^"(.*)"$/, '$1');
  }
  return env;
}

// ---- respool's command line in a manifest -----------------------------------------------------

/** A container's environment as Kubernetes would give it (the image's ENV, then the container's), with made-up values for references. */
function containerEnv(c: Obj): Record<string, string> {
  const env: Record<string, string> = isRespoolImage(c) ? imageEnv() : {};
  for (const e of asArray(c['env']) as Obj[]) {
    const name = String(e['name']);
    if (typeof e['value'] === 'string') env[name] = e['value'];
    else if (isObj(e['valueFrom'])) {
      const field = (e['valueFrom']['fieldRef'] as Obj | undefined)?.['fieldPath'];
      env[name] = field === 'metadata.namespace' ? 'default' : field === 'status.podIP' ? '10.1.2.3' : `secret-${name.toLowerCase()}`;
    }
  }
  return env;
}

/** Kubernetes' $(VAR) expansion in args. */
const expand = (s: string, env: Record<string, string>) => s.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, v: string) => env[v] ?? m);

/**
 * The argv respool gets in this container: the image's ENTRYPOINT flags, then `args` (unless the
 * container replaces the command). A `--config` path inside a mounted ConfigMap is replaced by a
 * temporary copy of that ConfigMap's key, so parseCommandLine reads the real file.
 */
function respoolArgv(ct: Container, docs: Doc[]): string[] {
  const command = ct.c['command'];
  if (command !== undefined) {
    // Allowed only to give node flags (V8 sizing) before the image's own script and flags.
    const argv = asArray(command).map(String);
    const ep = JSON.parse(dockerfile().filter((i) => i.op === 'ENTRYPOINT').pop()!.args) as string[];
    const script = ep.findIndex((a) => a.endsWith('bin/respool.js'));
    expect(argv[0], `${ct.doc.file}: the command runs the image's node`).toBe(ep[0]);
    expect(argv.slice(-(ep.length - script)), `${ct.doc.file}: the command ends as the image's ENTRYPOINT does`).toEqual(ep.slice(script));
    const nodeFlags = argv.slice(1, argv.length - (ep.length - script));
    for (const f of nodeFlags) expect(f, `${ct.doc.file}: ${f} is a node flag`).toMatch(/^--[a-z0-9-]+(=\S+)?$/);
    const run = spawnSync(process.execPath, [...nodeFlags, '-e', '0'], { encoding: 'utf8' });
    expect(run.status, `${ct.doc.file}: node accepts ${nodeFlags.join(' ')}: ${run.stderr}`).toBe(0);
  }
  const env = containerEnv(ct.c);
  const args = [...entrypointFlags(), ...asArray(ct.c['args']).map((a) => expand(String(a), env))];
  const i = args.indexOf('--config');
  if (i >= 0) {
    const path = args[i + 1]!;
    const mount = (asArray(ct.c['volumeMounts']) as Obj[]).find((m) => path.startsWith(String(m['mountPath']) + '/'));
    expect(mount, `${ct.doc.file}: --config ${path} is on a mounted volume`).toBeDefined();
    const volume = (asArray(ct.pod['volumes']) as Obj[]).find((v) => v['name'] === mount!['name']);
    const cmName = (volume?.['configMap'] as Obj | undefined)?.['name'];
    expect(cmName, `${ct.doc.file}: volume ${String(mount!['name'])} is a ConfigMap`).toBeDefined();
    const cm = docs.find((d) => d.obj['kind'] === 'ConfigMap' && (d.obj['metadata'] as Obj)['name'] === cmName);
    expect(cm, `${ct.doc.file}: ConfigMap ${String(cmName)} is in deploy/kubernetes`).toBeDefined();
    const key = posix.relative(String(mount!['mountPath']), path);
    const text = (cm!.obj['data'] as Obj)[key];
    expect(typeof text, `${ct.doc.file}: ConfigMap ${String(cmName)} has the key ${key}`).toBe('string');
    const file = join(tmp, `${String(cmName)}-${key}`);
    writeFileSync(file, text as string);
    args[i + 1] = file;
  }
  return args;
}

function parseRespool(argv: string[], env: Record<string, string>): RespoolConfig {
  const r = parseCommandLine(argv, env);
  if (r.kind !== 'run') throw new Error(`expected a run, got ${r.kind}`);
  return r.config;
}

// ---- PromQL -----------------------------------------------------------------------------------

const PROMQL_KEYWORDS = new Set([
  'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan',
]);

/** Metric names in a PromQL expression (Grafana variables allowed), each with the labels its selector matches on. */
function promqlSelectors(expr: string): { names: string[]; matcherLabels: Map<string, Set<string>>; groupingLabels: string[] } {
  const matcherLabels = new Map<string, Set<string>>();
  let s = expr.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""').replace(/\$\{[^}]*\}|\$\w+/g, '0s');
  for (const m of s.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}/g)) {
    const set = matcherLabels.get(m[1]!) ?? new Set<string>();
    for (const l of m[2]!.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) set.add(l[1]!);
    matcherLabels.set(m[1]!, set);
  }
  const groupingLabels: string[] = [];
  s = s.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, (_m, _k, labels: string) => {
    groupingLabels.push(...labels.split(',').map((l) => l.trim()).filter((l) => l !== ''));
    return ' ';
  });
  s = s.replace(/\{[^}]*\}/g, ' ').replace(/\[[^\]]*\]/g, ' ');
  const names: string[] = [];
  for (const m of s.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const before = s[m.index! - 1];
    if (before !== undefined && /[0-9.]/.test(before)) continue; // 5m, 1e3
    if (s.slice(m.index! + m[0].length).trimStart().startsWith('(')) continue; // a function
    if (PROMQL_KEYWORDS.has(m[0])) continue;
    names.push(m[0]);
  }
  return { names, matcherLabels, groupingLabels };
}

interface Exported {
  type: string;
  labels: string[] | null; // null: any (prom-client's default metrics)
}

/** Every series name respool's /metrics can show, with its labels. */
async function exportedMetrics(): Promise<Map<string, Exported>> {
  const m = new Metrics();
  const out = new Map<string, Exported>();
  const own = METRIC_DEFINITIONS as Record<string, { labelNames: readonly string[] }>;
  for (const metric of await m.registry.getMetricsAsJSON()) {
    const key = metric.name.startsWith(METRIC_PREFIX) ? metric.name.slice(METRIC_PREFIX.length) : metric.name;
    const labels = own[key] ? [...own[key]!.labelNames] : null;
    const type = String(metric.type);
    const series = type === 'histogram' ? ['_bucket', '_sum', '_count'].map((s) => metric.name + s)
      : type === 'summary' ? [metric.name, `${metric.name}_sum`, `${metric.name}_count`] : [metric.name];
    for (const name of series) out.set(name, { type, labels: labels && name.endsWith('_bucket') ? [...labels, 'le'] : labels });
  }
  for (const [name, p] of Object.entries(PENDING_METRICS)) {
    if (out.has(name) || out.has(`${name}_bucket`)) continue; // landed: checked as exported
    const series = p.type === 'histogram' ? ['_bucket', '_sum', '_count'].map((s) => name + s) : [name];
    for (const s of series) out.set(s, { type: p.type, labels: s.endsWith('_bucket') ? [...p.labels, 'le'] : p.labels });
  }
  return out;
}

/** Problems with one expression: unknown metric names, or labels those metrics do not have. */
function checkExpr(where: string, expr: string, exported: Map<string, Exported>): string[] {
  const problems: string[] = [];
  const { names, matcherLabels, groupingLabels } = promqlSelectors(expr);
  if (names.length === 0) problems.push(`${where}: no metric in ${JSON.stringify(expr)}`);
  const union = new Set<string>(TARGET_LABELS);
  let anyLabel = false;
  for (const name of names) {
    const e = exported.get(name);
    if (e === undefined) {
      problems.push(`${where}: ${name} is not a metric respool exports`);
      continue;
    }
    if (e.labels === null) anyLabel = true;
    else for (const l of e.labels) union.add(l);
    for (const l of matcherLabels.get(name) ?? []) {
      if (e.labels !== null && !e.labels.includes(l) && !TARGET_LABELS.includes(l)) problems.push(`${where}: ${name} has no label ${l}`);
    }
  }
  if (!anyLabel) {
    for (const l of groupingLabels) if (!union.has(l)) problems.push(`${where}: groups by ${l}, which none of ${names.join(', ')} has`);
  }
  return problems;
}

let exported: Map<string, Exported>;
beforeAll(async () => {
  exported = await exportedMetrics();
});

// ---- tests ------------------------------------------------------------------------------------

describe('deploy/kubernetes', () => {
  const docs = kubernetesDocs();
  const containers = docs.filter((d) => WORKLOAD_KINDS.has(String(d.obj['kind']))).flatMap(containersOf);
  const respools = containers.filter(isRespool);

  it('has the sidecar and the central deployment, every document with apiVersion, kind and metadata.name', () => {
    const files = new Set(docs.map((d) => d.file));
    expect(files).toContain('deploy/kubernetes/sidecar.yaml');
    expect(files).toContain('deploy/kubernetes/central.yaml');
    for (const { file, obj } of docs) {
      expect(typeof obj['apiVersion'], file).toBe('string');
      expect(typeof obj['kind'], file).toBe('string');
      expect(typeof (obj['metadata'] as Obj | undefined)?.['name'], `${file}: ${String(obj['kind'])} metadata.name`).toBe('string');
    }
    const kinds = docs.filter((d) => d.file.endsWith('central.yaml')).map((d) => d.obj['kind']);
    expect(kinds).toEqual(expect.arrayContaining(['ConfigMap', 'Deployment', 'Service', 'PodDisruptionBudget']));
    expect(respools.map((c) => c.doc.file).sort()).toEqual(['deploy/kubernetes/central.yaml', 'deploy/kubernetes/sidecar.yaml']);
  });

  it('every container has a name and an image, and none has a CPU limit', () => {
    expect(containers.length).toBeGreaterThanOrEqual(3);
    for (const { doc, c } of containers) {
      const where = `${doc.file}: container ${String(c['name'])}`;
      expect(typeof c['name'], where).toBe('string');
      expect(String(c['image'] ?? ''), where).toMatch(/\S+:\S+/);
      const limits = ((c['resources'] as Obj | undefined)?.['limits'] as Obj | undefined) ?? {};
      expect(limits['cpu'], `${where}: CPU limits throttle a latency-bound proxy`).toBeUndefined();
      expect(asArray(c['ports']).length, `${where}: ports`).toBeGreaterThan(0);
      expect(c['readinessProbe'], `${where}: readinessProbe`).toBeDefined();
      expect(c['livenessProbe'], `${where}: livenessProbe`).toBeDefined();
    }
  });

  it('respool containers: requests, non-root, read-only root, resp and admin ports, probes on the admin port', () => {
    for (const ct of respools) {
      const { doc, c, pod } = ct;
      const where = `${doc.file}: container ${String(c['name'])}`;
      const requests = ((c['resources'] as Obj | undefined)?.['requests'] as Obj | undefined) ?? {};
      expect(requests['cpu'], `${where}: CPU request`).toBeDefined();
      expect(requests['memory'], `${where}: memory request`).toBeDefined();
      const sc = (c['securityContext'] as Obj | undefined) ?? {};
      const podSc = (pod['securityContext'] as Obj | undefined) ?? {};
      expect(sc['runAsNonRoot'] ?? podSc['runAsNonRoot'], `${where}: runAsNonRoot`).toBe(true);
      const uid = sc['runAsUser'] ?? podSc['runAsUser'];
      expect(typeof uid === 'number' && uid > 0, `${where}: runAsUser, a number other than 0`).toBe(true);
      expect(sc['readOnlyRootFilesystem'], `${where}: readOnlyRootFilesystem`).toBe(true);
      expect(sc['allowPrivilegeEscalation'], `${where}: allowPrivilegeEscalation`).toBe(false);
      expect((sc['capabilities'] as Obj | undefined)?.['drop'], `${where}: capabilities.drop`).toEqual(['ALL']);

      const config = parseRespool(respoolArgv(ct, docs), containerEnv(c));
      expect(config.admin, `${where}: the admin server is on`).not.toBeNull();
      const adminPort = config.admin!.port;
      const ports = asArray(c['ports']).map((p) => (p as Obj)['containerPort']);
      expect(ports, `${where}: ports`).toEqual(expect.arrayContaining([config.listen!.port, adminPort]));
      expect(config.admin!.host, `${where}: the admin server must be reachable by the kubelet`).toBe('0.0.0.0');

      const probe = (name: string) => ((c[name] as Obj | undefined)?.['httpGet'] as Obj | undefined) ?? {};
      expect(probe('readinessProbe')['path'], `${where}: readiness`).toBe('/readyz');
      expect(probe('livenessProbe')['path'], `${where}: liveness`).toBe('/healthz');
      for (const name of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
        if (c[name] === undefined) continue;
        expect(portNumber(c, probe(name)['port']), `${where}: ${name} on the admin port`).toBe(adminPort);
      }
      expect(ct.podAnnotations['prometheus.io/scrape'], `${where}: scrape annotation`).toBe('true');
      expect(ct.podAnnotations['prometheus.io/port'], `${where}: scrape port`).toBe(String(adminPort));
      expect(ct.podAnnotations['prometheus.io/path'], `${where}: scrape path`).toBe('/metrics');
    }
  });

  it('respool containers: the args are respool flags, and the command line with the ConfigMap is accepted', () => {
    const known = new Set(FLAGS.flatMap((f) => [`--${f.name}`, ...(f.short ? [`-${f.short}`] : [])]));
    const src = filesUnder(join(repoRoot, 'src'), ['.ts']).map((f) => readFileSync(f, 'utf8')).join('\n');
    const settings = new Set(envSettings().map((e) => e.name));
    for (const ct of respools) {
      const where = `${ct.doc.file}: container ${String(ct.c['name'])}`;
      for (const a of asArray(ct.c['args']).map(String)) {
        if (a.startsWith('-')) expect(known.has(a.split('=')[0]!), `${where}: ${a} is a respool flag (respool --help)`).toBe(true);
      }
      for (const name of Object.keys(containerEnv(ct.c))) {
        if (!name.startsWith('RESPOOL_')) continue;
        expect(settings.has(name) || src.includes(`'${name}'`), `${where}: respool reads ${name}`).toBe(true);
      }
      const config = parseRespool(respoolArgv(ct, docs), containerEnv(ct.c));
      expect(config.upstreams.length, where).toBeGreaterThan(0);
      if (ct.doc.file.endsWith('sidecar.yaml')) {
        expect(config.listen, `${where}: the sidecar listens on loopback only`).toEqual({ host: '127.0.0.1', port: 6380 });
      } else {
        expect(config.listen, where).toEqual({ host: '0.0.0.0', port: 6380 });
        // A fleet: each pod announces its own IP and finds the others through the headless Service.
        expect(config.cluster.announce, `${where}: cluster clients are sent to this pod`).toEqual({ host: '10.1.2.3', port: 6380 });
        expect(config.cluster.peersFrom, `${where}: the members come from the headless Service`).toEqual({ kind: 'dns', name: 'respool-peers.default.svc.cluster.local', port: 6380 });
        const peers = docs.find((d) => d.obj['kind'] === 'Service' && (d.obj['metadata'] as Obj)['name'] === 'respool-peers');
        expect(peers, `${where}: a Service respool-peers`).toBeDefined();
        const spec = peers!.obj['spec'] as Obj;
        expect([spec['clusterIP'], spec['publishNotReadyAddresses']], `${where}: respool-peers is headless and lists unready pods`).toEqual(['None', true]);
      }
    }
  });

  it('the central Service and PodDisruptionBudget select the respool pods; the Service targets a resp port', () => {
    const central = docs.filter((d) => d.file.endsWith('central.yaml'));
    const deployment = central.find((d) => d.obj['kind'] === 'Deployment')!;
    const [ct] = containersOf(deployment).filter(isRespool);
    const matches = (sel: Obj) => Object.entries(sel).every(([k, v]) => ct!.podLabels[k] === v);
    const spec = (kind: string) => central.find((d) => d.obj['kind'] === kind)!.obj['spec'] as Obj;
    expect(matches(spec('Service')['selector'] as Obj)).toBe(true);
    expect(matches((spec('PodDisruptionBudget')['selector'] as Obj)['matchLabels'] as Obj)).toBe(true);
    expect(matches((spec('Deployment')['selector'] as Obj)['matchLabels'] as Obj)).toBe(true);
    for (const p of asArray(spec('Service')['ports']) as Obj[]) {
      expect(portNumber(ct!.c, p['targetPort']), `Service port ${String(p['name'])}`).toBe(6380);
    }
  });
});

describe('Dockerfile', () => {
  const ins = dockerfile();
  const lastStage = ins.slice(ins.map((i) => i.op).lastIndexOf('FROM'));

  it('builds and runs on Node 24 LTS (slim), and package.json engines names what the tests run on (20 and 24)', () => {
    const froms = ins.filter((i) => i.op === 'FROM').map((i) => i.args.split(/\s+/)[0]);
    expect(froms.length).toBeGreaterThan(0);
    for (const f of froms) expect(f).toMatch(/^node:24(\.\d+)*-bookworm-slim$/);
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
    expect(pkg.engines.node).toBe('20.x || 24.x');
  });

  it('runs as a non-root user, given by number so runAsNonRoot can verify it', () => {
    const user = lastStage.filter((i) => i.op === 'USER').pop();
    expect(user).toBeDefined();
    const [u] = user!.args.split(':');
    expect(u).toMatch(/^[1-9]\d*$/);
  });

  it('exposes 6380 and 9121 and listens on them on every interface (RESPOOL_LISTEN, RESPOOL_ADMIN)', () => {
    const exposed = lastStage.filter((i) => i.op === 'EXPOSE').flatMap((i) => i.args.split(/\s+/)).map((p) => p.split('/')[0]);
    expect(exposed).toEqual(expect.arrayContaining(['6380', '9121']));
    const env = imageEnv();
    const config = parseRespool([...entrypointFlags(), '--upstream', 'valkey:6379'], env);
    expect(config.listen).toEqual({ host: '0.0.0.0', port: 6380 });
    expect(config.admin).toEqual({ host: '0.0.0.0', port: 9121 });
    // docker run … respool --listen / -e RESPOOL_LISTEN, and Kubernetes args / env, change them.
    expect(parseRespool([...entrypointFlags(), '--upstream', 'v:1', '--listen', '127.0.0.1:6380'], env).listen!.host).toBe('127.0.0.1');
    expect(parseRespool(entrypointFlags(), { ...env, RESPOOL_UPSTREAMS: 'valkey:6379', RESPOOL_LISTEN: '127.0.0.1:6381' })).toMatchObject({
      listen: { host: '127.0.0.1', port: 6381 },
      upstreams: [{ host: 'valkey', port: 6379 }],
    });
  });

  it('has a HEALTHCHECK that asks the admin /healthz with node (no curl in slim images)', () => {
    const hc = lastStage.filter((i) => i.op === 'HEALTHCHECK').pop();
    expect(hc).toBeDefined();
    const cmd = /CMD\s+(\[.*\])\s*$/s.exec(hc!.args);
    expect(cmd, 'HEALTHCHECK … CMD ["node", "-e", "…"]').not.toBeNull();
    const argv = JSON.parse(cmd![1]!) as string[];
    expect(argv.slice(0, 2)).toEqual(['node', '-e']);
    expect(argv[2]).toContain('http://127.0.0.1:9121/healthz');
    expect(() => new Script(argv[2]!)).not.toThrow();
  });
});

describe('metric names', () => {
  it('the PromQL name extractor finds names and skips functions, keywords, labels and variables', () => {
    const r = promqlSelectors(
      'histogram_quantile(0.99, sum by (node, le) (rate(respool_upstream_latency_seconds_bucket{instance=~"$instance", node!="x"}[$__rate_interval]))) > 0.01 and on (instance) respool_slots_covered offset 5m',
    );
    expect(r.names).toEqual(['respool_upstream_latency_seconds_bucket', 'respool_slots_covered']);
    expect([...r.matcherLabels.get('respool_upstream_latency_seconds_bucket')!]).toEqual(['instance', 'node']);
    expect(r.groupingLabels).toEqual(['node', 'le', 'instance']);
    expect(checkExpr('t', 'sum by (nod) (respool_upstream_inflight_requests{nodes="a"})', exported)).toEqual([
      't: respool_upstream_inflight_requests has no label nodes',
      't: groups by nod, which none of respool_upstream_inflight_requests has',
    ]);
    expect(checkExpr('t', 'rate(respool_no_such_thing_total[5m])', exported)).toEqual(['t: respool_no_such_thing_total is not a metric respool exports']);
  });
});

describe('deploy/grafana/respool.json', () => {
  const dashboard = JSON.parse(readFileSync(join(repoRoot, 'deploy/grafana/respool.json'), 'utf8')) as Obj;
  const panels = (asArray(dashboard['panels']) as Obj[]).flatMap((p) => [p, ...(asArray(p['panels']) as Obj[])]);
  const exprs = panels.flatMap((p) => (asArray(p['targets']) as Obj[]).map((t) => ({ panel: String(p['title']), expr: String(t['expr']) })));

  it('is a dashboard: title, uid, unique panel ids, each panel with a position', () => {
    expect(dashboard['title']).toBe('respool');
    expect(typeof dashboard['uid']).toBe('string');
    const ids = panels.map((p) => p['id']);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels) expect(p['gridPos'], String(p['title'])).toBeDefined();
    expect(exprs.length).toBeGreaterThan(30);
  });

  it('every expr uses only metrics respool exports (or the pending ones), with their labels', () => {
    const problems = exprs.flatMap(({ panel, expr }) => checkExpr(`panel "${panel}"`, expr, exported));
    const vars = (asArray((dashboard['templating'] as Obj)['list']) as Obj[]).filter((v) => v['type'] === 'query');
    for (const v of vars) {
      const q = String(isObj(v['query']) ? v['query']['query'] : v['query']);
      const m = /label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*(\w+)\s*\)/.exec(q);
      expect(m, `variable ${String(v['name'])}`).not.toBeNull();
      problems.push(...checkExpr(`variable ${String(v['name'])}`, `sum by (${m![2]}) (${m![1]})`, exported));
    }
    expect(problems).toEqual([]);
  });

  it('covers throughput, latency per node, errors, links, leases, storms, hot keys, zones, circuits', () => {
    const all = exprs.map((e) => e.expr).join('\n');
    for (const name of [
      'respool_commands_total', 'respool_upstream_latency_seconds_bucket', 'respool_command_errors_total',
      'respool_upstream_links', 'respool_leased_connections', 'respool_client_connections_rejected_total',
      'respool_hotkeys_top_key_requests_per_second', 'respool_reads_total', 'respool_circuit_state',
      'respool_requests_shed_total', 'respool_nodes_saturated_ratio', 'respool_node_saturated',
    ]) expect(all, name).toContain(name);
    expect(all).toContain('queue="accept"');
    expect(all).toContain('outcome="other_zone_replica"');
  });
});

describe('deploy/prometheus/alerts.yml', () => {
  const rules = (asArray((parseYaml(readFileSync(join(repoRoot, 'deploy/prometheus/alerts.yml'), 'utf8')) as Obj)['groups']) as Obj[])
    .flatMap((g) => asArray(g['rules']) as Obj[]);

  it('has the alerts: slots uncovered, circuit open, shedding, p99 over target, reload failed', () => {
    const names = rules.map((r) => r['alert']);
    expect(names).toEqual(expect.arrayContaining([
      'RespoolSlotsUncovered', 'RespoolCircuitOpen', 'RespoolShedding', 'RespoolUpstreamP99High', 'RespoolClientP99High', 'RespoolReloadFailed',
      'RespoolNodesSaturated',
    ]));
    for (const r of rules) {
      expect(['warning', 'critical'], String(r['alert'])).toContain((r['labels'] as Obj)['severity']);
      expect(typeof (r['annotations'] as Obj)['summary'], String(r['alert'])).toBe('string');
    }
  });

  it('every expr uses only metrics respool exports (or the pending ones), with their labels', () => {
    expect(rules.flatMap((r) => checkExpr(`alert ${String(r['alert'])}`, String(r['expr']), exported))).toEqual([]);
  });
});

describe('deploy/systemd/respool.service', () => {
  const unit = readFileSync(join(repoRoot, 'deploy/systemd/respool.service'), 'utf8');
  const settings = unit.split('\n').filter((l) => /^[A-Z]\w*=/.test(l)).map((l) => l.split('=')[0]! + '=' + l.slice(l.indexOf('=') + 1));

  it('is hardened and reloads with SIGHUP', () => {
    for (const s of ['DynamicUser=yes', 'NoNewPrivileges=yes', 'ProtectSystem=strict', 'Restart=on-failure', 'ExecReload=/bin/kill -HUP $MAINPID']) {
      expect(settings).toContain(s);
    }
    const nofile = settings.find((s) => s.startsWith('LimitNOFILE='));
    expect(Number(nofile?.split('=')[1])).toBeGreaterThanOrEqual(65536);
    const exec = settings.find((s) => s.startsWith('ExecStart='))!.split(/\s+/);
    const flags = new Set(FLAGS.map((f) => `--${f.name}`));
    for (const a of exec.slice(1)) if (a.startsWith('--')) expect(flags.has(a), a).toBe(true);
  });

  it('runs supervised, so the SIGUSR2 takeover it documents works, and stops through the supervisor', () => {
    expect(settings.find((s) => s.startsWith('ExecStart='))!.split(/\s+/)).toContain('--supervised');
    expect(unit).toContain('systemctl kill -s SIGUSR2 --kill-whom=main respool');
    expect(settings).toContain('KillMode=mixed');
  });
});
