/**
 * TLS for the tests and benches: certificates made with `openssl` in a temp dir, a standalone
 * valkey-server with a TLS port next to its plaintext one (the harness checks readiness on the
 * plaintext port), and a TLS-only cluster (`--port 0 --tls-port P --tls-cluster yes`) started
 * and joined over TLS.
 *
 * No vitest imports here: compiled into build/harness/ for bench/tls-pooling.mjs.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RawClient, ReplyError, parseInfo, type RespArg, type RespReply } from './raw-client.js';
import { freePort, spawnTied, startStandalone, VALKEY_SERVER, type ValkeyNode } from './valkey-processes.js';

export interface TestCerts {
  dir: string;
  /** The test CA (signs server, server2 and client). */
  ca: string;
  caKey: string;
  /** 127.0.0.1 / localhost, CN respool-test-server. */
  serverCert: string;
  serverKey: string;
  /** Same names, CN respool-test-server-2: a rotated certificate. */
  server2Cert: string;
  server2Key: string;
  /** A client certificate (CN respool-test-client). */
  clientCert: string;
  clientKey: string;
  /** An unrelated CA that signed nothing here (a wrong trust anchor). */
  otherCa: string;
  /** Removes the dir. */
  remove(): void;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA, server certificates for 127.0.0.1/localhost, a client certificate and an unrelated CA (EC P-256, 2 days). */
export function makeTestCerts(): TestCerts {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'respool-tls-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=respool-test-ca'], dir);
  openssl(['req', '-x509', ...ec, '-keyout', 'other-ca.key', '-out', 'other-ca.crt', '-days', '2', '-subj', '/CN=respool-other-ca'], dir);
  writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n');
  writeFileSync(path.join(dir, 'client.ext'), 'basicConstraints=CA:FALSE\n');
  const issue = (name: string, cn: string, ext: string) => {
    openssl(['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`], dir);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', `${name}.crt`, '-days', '2', '-extfile', ext], dir);
  };
  issue('server', 'respool-test-server', 'server.ext');
  issue('server2', 'respool-test-server-2', 'server.ext');
  issue('client', 'respool-test-client', 'client.ext');
  const f = (n: string) => path.join(dir, n);
  return {
    dir, ca: f('ca.crt'), caKey: f('ca.key'),
    serverCert: f('server.crt'), serverKey: f('server.key'),
    server2Cert: f('server2.crt'), server2Key: f('server2.key'),
    clientCert: f('client.crt'), clientKey: f('client.key'),
    otherCa: f('other-ca.crt'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** valkey-server arguments for TLS with the test certificates. */
export function valkeyTlsArgs(certs: TestCerts, authClients: 'yes' | 'no' | 'optional' = 'no'): string[] {
  return [
    '--tls-cert-file', certs.serverCert, '--tls-key-file', certs.serverKey,
    '--tls-ca-cert-file', certs.ca, '--tls-auth-clients', authClients,
  ];
}

/** A standalone server with a TLS port (and its plaintext one, for the harness' readiness check). */
export async function startTlsStandalone(
  certs: TestCerts,
  opts: { password?: string; authClients?: 'yes' | 'no' | 'optional'; args?: string[] } = {},
): Promise<{ node: ValkeyNode; tlsPort: number }> {
  const tlsPort = await freePort();
  const node = await startStandalone({
    ...(opts.password !== undefined ? { password: opts.password } : {}),
    args: ['--tls-port', String(tlsPort), ...valkeyTlsArgs(certs, opts.authClients), ...(opts.args ?? [])],
  });
  return { node, tlsPort };
}

/** One command over TLS (trusting the test CA); error replies resolve as ReplyError. */
export async function tlsCall(certs: TestCerts, port: number, args: RespArg[], password?: string): Promise<RespReply> {
  const c = await RawClient.connect(port, {
    tls: { ca: readFileSync(certs.ca) },
    connectTimeoutMs: 1000,
    timeoutMs: 3000,
    ...(password !== undefined ? { password } : {}),
  });
  try {
    return await c.call(...args);
  } finally {
    c.close();
  }
}

export interface TlsCluster {
  /** The nodes' TLS ports (they have no plaintext port). */
  readonly ports: number[];
  readonly dirs: string[];
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * A TLS-only cluster of `primaries` primaries (no replicas): every node `--port 0 --tls-port P
 * --tls-cluster yes`, slots split evenly, joined with CLUSTER MEET over TLS. Resolves once every
 * node reports cluster_state:ok and knows all the others.
 */
export async function startTlsCluster(certs: TestCerts, primaries = 3, timeoutMs = 30_000): Promise<TlsCluster> {
  const ports: number[] = [];
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  const stop = async () => {
    for (const c of children) {
      try {
        if (c.pid !== undefined && c.exitCode === null) process.kill(c.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await sleep(50);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < primaries; i++) {
      const port = await freePort(); // port + 10000 is free too: the bus
      const dir = mkdtempSync(path.join(os.tmpdir(), 'respool-test-tls-'));
      ports.push(port);
      dirs.push(dir);
      const child = spawnTied(VALKEY_SERVER, [
        '--port', '0', '--tls-port', String(port), '--cluster-port', String(port + 10000),
        '--bind', '127.0.0.1', '--daemonize', 'no', '--dir', dir, '--logfile', path.join(dir, 'valkey.log'),
        '--save', '', '--appendonly', 'no',
        '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000',
        '--tls-cluster', 'yes', '--tls-replication', 'yes', ...valkeyTlsArgs(certs),
      ], { cwd: dir, stdio: 'ignore' });
      child.unref();
      children.push(child);
    }
    const deadline = Date.now() + timeoutMs;
    const call = (port: number, ...args: RespArg[]) => tlsCall(certs, port, args);
    const until = async (what: string, check: () => Promise<boolean>) => {
      let last = '';
      while (Date.now() < deadline) {
        try {
          if (await check()) return;
        } catch (e) {
          last = (e as Error).message;
        }
        await sleep(50);
      }
      const logs = dirs.map((d) => {
        try {
          return readFileSync(path.join(d, 'valkey.log'), 'utf8').slice(-1500);
        } catch {
          return '(no log)';
        }
      });
      throw new Error(`TLS cluster: ${what} not reached in ${timeoutMs} ms (${last})\n${logs.join('\n---\n')}`);
    };
    for (const port of ports) await until(`node ${port} answering`, async () => (await call(port, 'PING')) === 'PONG');
    const per = Math.floor(16384 / primaries);
    for (let i = 0; i < primaries; i++) {
      const start = i * per;
      const end = i === primaries - 1 ? 16383 : start + per - 1;
      const r = await call(ports[i]!, 'CLUSTER', 'ADDSLOTSRANGE', start, end);
      if (r instanceof ReplyError) throw r;
    }
    for (const port of ports.slice(1)) {
      const r = await call(port, 'CLUSTER', 'MEET', '127.0.0.1', ports[0]!, ports[0]! + 10000);
      if (r instanceof ReplyError) throw r;
    }
    await until('cluster_state:ok on every node', async () => {
      for (const port of ports) {
        const info = parseInfo(await call(port, 'CLUSTER', 'INFO'));
        if (info['cluster_state'] !== 'ok' || Number(info['cluster_known_nodes']) !== primaries) return false;
      }
      return true;
    });
    return { ports, dirs, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
