/**
 * Demo entry (scripts/demo.sh): a local 3-primary + 3-replica Valkey cluster with respool in front.
 *
 *   node build/harness/demo-cluster.js [extra respool flags…]   (built by `npm run build:harness`)
 *
 * Env: RESPOOL_DEMO_PORT (listen port, default 6380), RESPOOL_DEMO_ADMIN (admin address, default
 * 127.0.0.1:9121), RESPOOL_DEMO_ZONE (respool's zone, default az-a).
 * respool reads with azAffinity and learns its zone at start from a fake AWS instance metadata
 * service that this process serves on 127.0.0.1 (nothing contacts a real metadata address);
 * pass --read-strategy / --zone to override. SIGINT/SIGTERM are forwarded to respool; when it exits the cluster is stopped
 * and this process exits with respool's status.
 */
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnTied, startCluster, type ValkeyCluster } from './valkey-processes.js';

// The repo root: two levels up from build/harness/demo-cluster.js (and from test/harness/).
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const listenPort = process.env['RESPOOL_DEMO_PORT'] ?? '6380';
const admin = process.env['RESPOOL_DEMO_ADMIN'] ?? '127.0.0.1:9121';
const demoZone = process.env['RESPOOL_DEMO_ZONE'] ?? 'az-a';

/** A fake AWS IMDSv2 on 127.0.0.1 answering `demoZone`; its base URL. */
async function startFakeMetadata(): Promise<string> {
  const server = http.createServer((req, res) => {
    if (req.method === 'PUT' && req.url === '/latest/api/token') return void res.end('demo-token');
    if (req.url === '/latest/meta-data/placement/availability-zone') return void res.end(demoZone);
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

let cluster: ValkeyCluster | undefined;
let proxy: ChildProcess | undefined;
let stopping = false;

async function shutdown(code: number): Promise<never> {
  stopping = true;
  try {
    await cluster?.stop();
  } catch (e) {
    console.error(`demo: stopping the cluster failed: ${(e as Error).message}`);
  }
  process.exit(code);
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (proxy && proxy.exitCode === null && proxy.signalCode === null) {
      proxy.kill(sig); // respool drains and exits; its 'exit' handler stops the cluster
    } else if (!stopping) {
      void shutdown(130);
    }
  });
}

async function main(): Promise<void> {
  console.log('demo: starting a Valkey cluster (3 primaries, 3 replicas, zones az-a/az-b/az-c)…');
  cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1, zones: ['az-a', 'az-b', 'az-c'] });
  if (stopping) return;
  for (const s of await cluster.shards()) {
    const [a, b] = s.slots[0] ?? [0, -1];
    console.log(
      `demo:   primary ${s.primary.address} (${s.primary.zone}) slots ${a}-${b}` +
        s.replicas.map((r) => `, replica ${r.address} (${r.zone})`).join(''),
    );
  }
  const seeds = cluster.nodes.slice(0, 2).map((n) => n.address).join(',');
  const listen = listenPort.includes(':') ? listenPort : `127.0.0.1:${listenPort}`;
  const metadataUrl = await startFakeMetadata();
  console.log(`demo: reads use azAffinity; respool's zone comes from a fake AWS metadata service on ${metadataUrl} (${demoZone})`);
  const reads = ['--read-strategy', 'azAffinity', '--zone-from', 'aws', '--metadata-base-url', metadataUrl];
  const args = [path.join(root, 'bin', 'respool.js'), '--listen', listen, '--upstream', seeds, '--admin', admin, ...reads, ...process.argv.slice(2)];
  console.log(`demo: node ${args.map((a) => (a.startsWith(root) ? path.relative(root, a) : a)).join(' ')}`);
  const port = listen.slice(listen.lastIndexOf(':') + 1);
  console.log(`demo: try  valkey-cli -p ${port} set hello world  |  open http://${admin}/ (status page)  |  curl http://${admin}/metrics  |  Ctrl-C to stop`);
  // Tied to us (dies if we are SIGKILLed) and in its own process group: it gets exactly one
  // forwarded signal, and the cluster (also its own group) stays up until respool has drained.
  proxy = spawnTied(process.execPath, args, { cwd: root, stdio: 'inherit' });
  proxy.once('error', (e) => {
    console.error(`demo: could not start respool: ${e.message}`);
    void shutdown(1);
  });
  proxy.once('exit', (code, signal) => {
    console.log(`demo: respool exited (${signal ?? code}); stopping the cluster`);
    void shutdown(code ?? (signal === 'SIGINT' || signal === 'SIGTERM' ? 0 : 1));
  });
}

main().catch(async (e: unknown) => {
  console.error(`demo: ${(e as Error).message}`);
  await shutdown(1);
});
