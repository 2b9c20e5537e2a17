/**
 * respool's layering, checked by dependency-cruiser (`npm run check:layers`, run by .ci/run).
 *
 * LAYERS lists src/'s rooms from the top down: a file may import its own room and the rooms
 * below it, never one above (type-only imports included). So the dependencies point one way:
 * session → handlers → client → … → upstream → metrics → config → … → util.
 * Also: no import cycle at run time anywhere; a cycle of type-only imports only inside one folder;
 * nothing in src/ imports test/ or bench/.
 */
const LAYERS = [
  ['main', 'src/main\\.ts$'],
  ['server', 'src/(server|backend|server-[a-z-]+)\\.ts$'],
  ['admin', 'src/admin/'], // the HTTP endpoint, on top
  ['session', 'src/session/'], // the socket, framing, admission order
  ['handlers', 'src/handlers/'], // one file per command family; index.ts: dispatch
  ['workers', 'src/workers/'], // the supervisor, messages between workers
  ['client', 'src/client/'], // per-client state, reply queue, the contract handlers see
  ['tenants', 'src/tenants/'], // applications sharing respool: their limits and counts
  ['scripts', 'src/scripts/'], // scripts seen and scripts running
  ['observe', 'src/observe/'], // what a request cost: slow log, command logs, big keys, saturation
  ['hotkeys', 'src/hotkeys/'], // detection, split copies (plugs into routing through routing/hooks.ts)
  ['fleet', 'src/fleet/'], // membership, shared state, the cluster respool shows
  ['pubsub', 'src/pubsub/'], // multiplexed subscriptions
  ['parking', 'src/parking/'], // blocked clients parked at respool, woken by the nodes' key changes
  ['routing', 'src/routing/'], // slot → node, MOVED/ASK, fan-out
  ['cluster', 'src/cluster/'], // topology snapshots, discovery, refresh
  ['upstream', 'src/upstream/'], // links, pools, leases, dialing, health
  ['metrics', 'src/metrics/'], // the metric table and histograms, used by every floor
  ['config', 'src/config/'],
  ['acl', 'src/acl/'],
  ['keys', 'src/keys/'], // key names between clients and nodes: colocation rules
  ['commands', 'src/commands/'],
  ['resp', 'src/resp/'],
  ['util', 'src/util/'],
  ['base', 'src/(errors|own-files)\\.ts$'],
];

const layerRules = LAYERS.slice(1).map(([name, path], i) => ({
  name: `layer-${name}`,
  comment: `${name} imports only its own room and the rooms below it (${LAYERS.slice(i + 2).map(([n]) => n).join(', ') || 'none'})`,
  severity: 'error',
  from: { path: `^${path}` },
  to: { path: LAYERS.slice(0, i + 1).map(([, p]) => `^${p}`) },
}));

module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'no-runtime-cycle',
      comment: 'modules must not import each other in a loop at run time',
      severity: 'error',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'type-cycles-in-one-folder',
      comment: 'a loop of type-only imports stays inside one folder',
      severity: 'error',
      from: { path: '^src/([^/]+)/' },
      to: { circular: true, viaSomeNot: '^src/$1/' },
    },
    {
      name: 'src-not-to-test-or-bench',
      comment: 'the product never imports its tests or benches',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'not-unresolvable',
      comment: 'every relative import resolves',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^(src|test|bench)/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.test.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'] },
  },
};
