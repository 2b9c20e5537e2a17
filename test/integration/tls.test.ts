// TLS on both sides of respool, with real valkey-server processes and certificates made with
// openssl at test time (test/harness/valkey-tls.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { startTestProxy } from '../helpers/proxy.js';
import type { RespoolProxy } from '../../src/server.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { fromClusterShards } from '../../src/cluster/discovery.js';
import { RawClient, ReplyError, type RawClientOptions } from '../harness/raw-client.js';
import { makeTestCerts, startTlsCluster, startTlsStandalone, tlsCall, type TestCerts, type TlsCluster } from '../harness/valkey-tls.js';
import type { ValkeyNode } from '../harness/valkey-processes.js';
import { RESPOOL_BIN as BIN, runRespool as respool } from '../helpers/respool-cli.js';


let certs: TestCerts;
let valkey: { node: ValkeyNode; tlsPort: number };
const proxies: RespoolProxy[] = [];

function tlsListenConfig(extra: Partial<RespoolConfig['tls']> = {}): Partial<RespoolConfig> {
  return {
    listenTls: { host: '127.0.0.1', port: 0 },
    tls: { cert: certs.serverCert, key: certs.serverKey, ca: null, requireClientCert: false, minVersion: 'TLSv1.2', ciphers: null, ...extra },
  };
}
function upstreamTls(extra: Partial<RespoolConfig['upstreamTls']> = {}): RespoolConfig['upstreamTls'] {
  // The standalone server runs with tls-auth-clients yes: respool shows its client certificate.
  return { enabled: true, ca: certs.ca, cert: certs.clientCert, key: certs.clientKey, servername: null, rejectUnauthorized: true, ...extra };
}
async function proxy(overrides: Partial<RespoolConfig>, upstreamPort = valkey.tlsPort): Promise<RespoolProxy> {
  const p = await startTestProxy([{ host: '127.0.0.1', port: upstreamPort }], overrides as never);
  proxies.push(p);
  return p;
}
/** A TLS client of respool's TLS listener, trusting the test CA. */
function tlsClient(p: RespoolProxy, opts: tls.ConnectionOptions = {}, more: RawClientOptions = {}): Promise<RawClient> {
  return RawClient.connect(p.tlsAddress!.port, { tls: { ca: readFileSync(certs.ca), servername: 'localhost', ...opts }, ...more });
}
function peerCn(c: RawClient): string {
  return String((c.socket as tls.TLSSocket).getPeerCertificate().subject.CN);
}

beforeAll(async () => {
  certs = makeTestCerts();
  valkey = await startTlsStandalone(certs, { authClients: 'yes' });
});
afterAll(async () => {
  for (const p of proxies) await p.close().catch(() => undefined);
  await valkey?.node.stop();
  certs?.remove();
});

describe('TLS between clients and respool, and respool and a standalone Valkey', () => {
  it('serves GET/SET, pipelines and RESP3 on the TLS listener, with the plaintext listener side by side', async () => {
    const p = await proxy({ ...tlsListenConfig(), upstreamTls: upstreamTls() });
    expect(p.tlsAddress).not.toBeNull();
    const c = await tlsClient(p);
    expect((c.socket as tls.TLSSocket).encrypted).toBe(true);
    expect(peerCn(c)).toBe('respool-test-server');
    expect(await c.call('SET', 'tls:k', 'v1')).toBe('OK');
    expect(await c.call('GET', 'tls:k')).toBe('v1');
    // 200 pipelined requests, replies in order
    const replies = await Promise.all(Array.from({ length: 200 }, (_, i) => c.call('INCR', `tls:n:${i % 7}`)));
    expect(replies.length).toBe(200);
    expect(await c.call('GET', 'tls:n:0')).toBe(String(Math.ceil(200 / 7)));
    // RESP3 on the same TLS connection
    const hello = await c.call('HELLO', '3');
    expect(hello instanceof Map || Array.isArray(hello)).toBe(true);
    expect(await c.call('HGETALL', 'tls:nohash')).toEqual(new Map());
    // the plaintext listener at the same time sees the same data
    const plain = await RawClient.connect(p.address.port);
    expect(await plain.call('GET', 'tls:k')).toBe('v1');
    // and it really went to the node (over its TLS port): read it on the node's plaintext port
    expect(await valkey.node.call('GET', 'tls:k')).toBe('v1');
    c.close();
    plain.close();
  });

  it('uses TLS on every kind of upstream connection: leases, pub/sub, one-shot', async () => {
    const p = await proxy({ ...tlsListenConfig(), upstreamTls: upstreamTls() });
    const c = await tlsClient(p);
    // leased connection (blocking command)
    expect(await c.call('BLPOP', 'tls:empty', '0.05')).toBeNull();
    // WATCH lane
    expect(await c.call('WATCH', 'tls:w')).toBe('OK');
    expect(await c.call('MULTI')).toBe('OK');
    expect(await c.call('SET', 'tls:w', '1')).toBe('QUEUED');
    expect(await c.call('EXEC')).toEqual(['OK']);
    // one-shot connection (SCRIPT KILL goes to every primary on a connection of its own)
    const kill = await c.call('SCRIPT', 'KILL');
    expect(kill).toBeInstanceOf(ReplyError);
    expect((kill as ReplyError).message).toMatch(/NOTBUSY/);
    // pub/sub subscriber connection
    const sub = await tlsClient(p);
    await sub.call('SUBSCRIBE', 'tls:ch');
    await new Promise((r) => setTimeout(r, 100));
    expect(await c.call('PUBLISH', 'tls:ch', 'hello')).toBe(1);
    const deadline = Date.now() + 3000;
    while (sub.unsolicited.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(sub.unsolicited[0]).toEqual(['message', 'tls:ch', 'hello']);
    c.close();
    sub.close();
  });

  it('mTLS: refuses a client without a certificate, accepts one with a certificate from tls.ca', async () => {
    const p = await proxy({ ...tlsListenConfig({ ca: certs.ca, requireClientCert: true }), upstreamTls: upstreamTls() });
    let refused: unknown = null;
    try {
      const anon = await tlsClient(p, {}, { timeoutMs: 3000 });
      await anon.call('PING'); // TLS 1.3: the server's alert arrives after the client's handshake
      anon.close();
    } catch (e) {
      refused = e;
    }
    expect(refused).toBeInstanceOf(Error);
    const c = await tlsClient(p, { cert: readFileSync(certs.clientCert), key: readFileSync(certs.clientKey) });
    expect(await c.call('PING')).toBe('PONG');
    expect(await c.call('SET', 'tls:mtls', 'yes')).toBe('OK');
    c.close();
  });

  it('applies tls.minVersion and tls.ciphers', async () => {
    const p = await proxy({ ...tlsListenConfig({ minVersion: 'TLSv1.3' }), upstreamTls: upstreamTls() });
    await expect(tlsClient(p, { maxVersion: 'TLSv1.2' })).rejects.toThrow(/protocol version|alert/i);
    const c13 = await tlsClient(p);
    expect((c13.socket as tls.TLSSocket).getProtocol()).toBe('TLSv1.3');
    c13.close();
    const q = await proxy({ ...tlsListenConfig({ ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' }), upstreamTls: upstreamTls() });
    const c12 = await tlsClient(q, { maxVersion: 'TLSv1.2' });
    expect((c12.socket as tls.TLSSocket).getCipher().standardName).toBe('TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256');
    expect(await c12.call('PING')).toBe('PONG');
    c12.close();
  });

  it('names the node and the TLS failure when the upstream certificate does not verify (wrong CA)', async () => {
    const p = await proxy({ mode: 'standalone', upstreamTls: upstreamTls({ ca: certs.otherCa }) });
    const c = await RawClient.connect(p.address.port);
    const reply = await c.call('GET', 'tls:k');
    expect(reply).toBeInstanceOf(ReplyError);
    const message = (reply as ReplyError).message;
    expect(message).toContain(`127.0.0.1:${valkey.tlsPort}`);
    // e.g. "ERR respool: upstream 127.0.0.1:P is unavailable (TLS handshake failed: self-signed
    // certificate in certificate chain (SELF_SIGNED_CERT_IN_CHAIN); circuit open after …)"
    expect(message).toMatch(/is unavailable \(TLS handshake failed: (self-signed certificate in certificate chain|unable to get local issuer certificate) \((SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)\)/);
    c.close();
  });
});

describe('a TLS-only cluster', () => {
  let cluster: TlsCluster;
  beforeAll(async () => {
    cluster = await startTlsCluster(certs, 3);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('discovers the nodes\' TLS ports and serves keys of every slot over TLS', async () => {
    // The nodes have no plaintext port: CLUSTER SHARDS lists only tls-port for them.
    const shards = JSON.stringify(await tlsCall(certs, cluster.ports[0]!, ['CLUSTER', 'SHARDS']));
    expect(shards).toContain('"tls-port"');
    expect(shards).not.toContain('"port"');
    const p = await proxy({ upstreamTls: upstreamTls({ cert: null, key: null }) }, cluster.ports[0]!);
    const topology = p.refresher.current;
    expect(topology?.mode).toBe('cluster');
    expect(topology!.shards.map((s) => s.primary.port).sort()).toEqual([...cluster.ports].sort());
    const c = await RawClient.connect(p.address.port);
    const keys = Array.from({ length: 60 }, (_, i) => `tls:c:${i}`);
    await Promise.all(keys.map((k) => c.call('SET', k, k)));
    expect(await Promise.all(keys.map((k) => c.call('GET', k)))).toEqual(keys);
    c.close();
  });

  it('takes tls-port from CLUSTER SHARDS only with upstream TLS, port otherwise', () => {
    const reply = [[
      'slots', [0, 16383],
      'nodes', [['id', 'a', 'port', 7000, 'tls-port', 7100, 'ip', '127.0.0.1', 'endpoint', '127.0.0.1', 'role', 'master', 'health', 'online']],
    ]];
    expect(fromClusterShards(reply, { host: '127.0.0.1' }, true).shards[0]!.primary.port).toBe(7100);
    expect(fromClusterShards(reply, { host: '127.0.0.1' }, false).shards[0]!.primary.port).toBe(7000);
    const tlsOnly = [[
      'slots', [0, 16383],
      'nodes', [['id', 'b', 'tls-port', 7100, 'ip', '127.0.0.1', 'endpoint', '127.0.0.1', 'role', 'master', 'health', 'online']],
    ]];
    expect(() => fromClusterShards(tlsOnly, { host: '127.0.0.1' }, false)).toThrow(/no plaintext port/);
  });
});

describe('certificate rotation', () => {
  it('reloadTls(): established clients stay, new clients get the new certificate; a bad file keeps the old one', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'respool-tls-rot-'));
    const cert = path.join(dir, 'live.crt');
    const key = path.join(dir, 'live.key');
    copyFileSync(certs.serverCert, cert);
    copyFileSync(certs.serverKey, key);
    const p = await proxy({ ...tlsListenConfig({ ca: null }), tls: { ...tlsListenConfig().tls!, cert, key }, upstreamTls: upstreamTls() });
    const old = await tlsClient(p);
    expect(peerCn(old)).toBe('respool-test-server');
    copyFileSync(certs.server2Cert, cert);
    copyFileSync(certs.server2Key, key);
    p.reloadTls();
    expect(await old.call('PING')).toBe('PONG');
    const fresh = await tlsClient(p);
    expect(peerCn(fresh)).toBe('respool-test-server-2');
    writeFileSync(cert, 'not a certificate');
    expect(() => p.reloadTls()).toThrow();
    const third = await tlsClient(p);
    expect(peerCn(third)).toBe('respool-test-server-2');
    for (const c of [old, fresh, third]) c.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('SIGHUP to the respool process reloads the certificate without dropping clients', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'respool-tls-hup-'));
    const cert = path.join(dir, 'live.crt');
    const key = path.join(dir, 'live.key');
    copyFileSync(certs.serverCert, cert);
    copyFileSync(certs.serverKey, key);
    const child = spawn('node', [BIN, '--listen', '127.0.0.1:0', '--listen-tls', '127.0.0.1:0', '--tls-cert', cert, '--tls-key', key,
      '--upstream', `127.0.0.1:${valkey.tlsPort}`, '--upstream-tls-ca', certs.ca,
      '--upstream-tls-cert', certs.clientCert, '--upstream-tls-key', certs.clientKey], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      const waitFor = async (re: RegExp) => {
        const deadline = Date.now() + 15_000;
        while (!re.test(stderr) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
        const m = re.exec(stderr);
        if (!m) throw new Error(`no ${re} in: ${stderr}`);
        return m;
      };
      const port = Number((await waitFor(/"listenTls":\{"host":"127\.0\.0\.1","port":(\d+)\}/))[1]);
      const connect = () => RawClient.connect(port, { tls: { ca: readFileSync(certs.ca), servername: 'localhost' } });
      const old = await connect();
      expect(await old.call('SET', 'tls:hup', '1')).toBe('OK');
      expect(peerCn(old)).toBe('respool-test-server');
      copyFileSync(certs.server2Cert, cert);
      copyFileSync(certs.server2Key, key);
      child.kill('SIGHUP');
      await waitFor(/TLS certificates reloaded/);
      expect(await old.call('GET', 'tls:hup')).toBe('1');
      const fresh = await connect();
      expect(peerCn(fresh)).toBe('respool-test-server-2');
      expect(await fresh.call('GET', 'tls:hup')).toBe('1');
      old.close();
      fresh.close();
    } finally {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('TLS settings on the command line and in the file', () => {
  it('exits 2 naming the field for a missing file or a missing certificate', async () => {
    const missing = await respool(['--upstream', '127.0.0.1:7000', '--listen-tls', '127.0.0.1:0', '--tls-cert', '/nonexistent/cert.pem', '--tls-key', certs.serverKey]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--tls-cert: cannot read "\/nonexistent\/cert\.pem" \(no such file\)/);
    const noCert = await respool(['--upstream', '127.0.0.1:7000', '--listen-tls', '127.0.0.1:0']);
    expect(noCert.code).toBe(2);
    expect(noCert.stderr).toMatch(/listenTls \(--listen-tls\) needs tls\.cert \(--tls-cert\)/);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'respool-tls-cfg-'));
    const file = path.join(dir, 'tls.yaml');
    writeFileSync(file, `upstreams: ["127.0.0.1:7000"]\nupstreamTls:\n  ca: /nonexistent/ca.pem\n`);
    const inFile = await respool(['--config', file]);
    expect(inFile.code).toBe(2);
    expect(inFile.stderr).toMatch(/upstreamTls\.ca: cannot read "\/nonexistent\/ca\.pem" \(no such file\)/);
    writeFileSync(file, `upstreams: ["127.0.0.1:7000"]\nlistenTls: "127.0.0.1:0"\ntls:\n  cert: ${certs.serverCert}\n  key: ${certs.clientKey}\n`);
    const mismatch = await respool(['--config', file]);
    expect(mismatch.code).toBe(2);
    expect(mismatch.stderr).toMatch(/tls\.cert \/ tls\.key .*not usable/);
    rmSync(dir, { recursive: true, force: true });
  });

  it('documents the TLS flags in --help', async () => {
    const { stdout } = await respool(['--help']);
    for (const flag of ['--listen-tls', '--tls-cert', '--tls-key', '--tls-ca', '--tls-require-client-cert', '--tls-min-version',
      '--tls-ciphers', '--upstream-tls', '--upstream-tls-ca', '--upstream-tls-cert', '--upstream-tls-key',
      '--upstream-tls-servername', '--upstream-tls-reject-unauthorized']) {
      expect(stdout).toContain(flag);
    }
  });
});
