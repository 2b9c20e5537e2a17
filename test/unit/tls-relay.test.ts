/**
 * A takeover's TLS client (src/session/tls-relay.ts): the old process keeps the TLS and relays
 * its plaintext, both ways, to the far end of a loopback connection (what the new process
 * serves); what was decrypted before the relay goes first; either side closing closes the other.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import tls from 'node:tls';
import type { AddressInfo, Socket } from 'node:net';
import { TlsRelays } from '../../src/session/tls-relay.js';
import { makeTestCerts, type TestCerts } from '../harness/valkey-tls.js';
import { stopKernelReads } from '../../src/util/kernel-reads.js';

let certs: TestCerts;
beforeAll(() => {
  certs = makeTestCerts();
});
afterAll(() => certs?.remove());

/** A TLS server's accepted socket and its client, connected. */
async function tlsPair(): Promise<{ accepted: tls.TLSSocket; client: tls.TLSSocket; server: tls.Server }> {
  const server = tls.createServer({ cert: fs.readFileSync(certs.serverCert), key: fs.readFileSync(certs.serverKey) });
  const acceptedP = new Promise<tls.TLSSocket>((resolve) => server.once('secureConnection', resolve));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const client = tls.connect({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', ca: fs.readFileSync(certs.ca), servername: 'localhost' });
  await new Promise<void>((resolve) => client.once('secureConnect', () => resolve()));
  return { accepted: await acceptedP, client, server };
}

const nextData = (s: Socket) => new Promise<string>((resolve) => s.once('data', (d: Buffer) => resolve(d.toString())));

describe('TlsRelays', () => {
  it('relays both ways between the TLS client and the far end, then closes both when the client leaves', async () => {
    const { accepted, client, server } = await tlsPair();
    const sessionListener = () => {
      throw new Error('the session read after the relay started');
    };
    accepted.on('data', sessionListener);
    accepted.pause();
    stopKernelReads(accepted); // the session's hold
    const relays = new TlsRelays();
    const far = await relays.relay(accepted, (s) => s.off('data', sessionListener));
    expect(relays.count).toBe(1);
    far.resume();
    const got = nextData(far);
    client.write('PING\r\n');
    expect(await got).toBe('PING\r\n');
    const back = nextData(client);
    far.write('+PONG\r\n');
    expect(await back).toBe('+PONG\r\n');
    const settled = relays.settle(5000);
    const farClosed = new Promise((r) => far.once('close', r));
    client.end();
    await farClosed;
    await settled;
    expect(relays.count).toBe(0);
    server.close();
  });

  it('closes the relays still open after settle\'s bound', async () => {
    const { accepted, client, server } = await tlsPair();
    accepted.pause();
    const relays = new TlsRelays();
    const far = await relays.relay(accepted, () => {});
    far.resume();
    const clientClosed = new Promise((r) => client.once('close', r));
    client.on('error', () => {});
    await relays.settle(50);
    await clientClosed;
    expect(relays.count).toBe(0);
    far.destroy();
    server.close();
  });
});
