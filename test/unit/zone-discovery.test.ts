// respool's own zone from config / RESPOOL_ZONE / a cloud metadata service. The metadata service
// here is a fake HTTP server on 127.0.0.1: nothing in this file contacts any other address.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { fetchZone, resolveOwnZone } from '../../src/cluster/zone-discovery.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { ReadsConfig } from '../../src/config/types.js';

interface Hit {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

/** Behaviour of the fake metadata service, switched per test. */
let mode: 'normal' | 'imdsv1' | 'hang' | 'error' = 'normal';
const hits: Hit[] = [];
let server: http.Server;
let baseUrl: string;
const hanging: http.ServerResponse[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    hits.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    if (mode === 'hang') {
      hanging.push(res); // never answers
      return;
    }
    if (mode === 'error') {
      res.writeHead(500).end('boom');
      return;
    }
    const send = (status: number, body: string) => res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
    switch (`${req.method} ${req.url}`) {
      case 'PUT /latest/api/token':
        if (mode === 'imdsv1') return send(403, 'forbidden');
        return req.headers['x-aws-ec2-metadata-token-ttl-seconds'] ? send(200, 'tok-123') : send(400, 'no ttl');
      case 'GET /latest/meta-data/placement/availability-zone':
        if (mode === 'normal' && req.headers['x-aws-ec2-metadata-token'] !== 'tok-123') return send(401, 'no token');
        return send(200, 'us-east-1b');
      case 'GET /computeMetadata/v1/instance/zone':
        return req.headers['metadata-flavor'] === 'Google' ? send(200, 'projects/1234/zones/europe-west1-c') : send(403, 'no flavor');
      case 'GET /metadata/instance/compute?api-version=2021-02-01':
        return req.headers['metadata'] === 'true'
          ? send(200, JSON.stringify({ location: 'westeurope', zone: '3', name: 'vm' }))
          : send(400, 'no header');
      default:
        return send(404, 'not found');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  for (const res of hanging) res.destroy();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  mode = 'normal';
  hits.length = 0;
});

const silent = pino({ level: 'silent' });

function reads(overrides: Partial<ReadsConfig>): ReadsConfig {
  return { ...DEFAULT_CONFIG.reads, prefixes: [], metadataBaseUrl: baseUrl, ...overrides };
}

describe('own zone', () => {
  it('config wins over RESPOOL_ZONE, which wins over the metadata service', async () => {
    expect(await resolveOwnZone(reads({ zone: 'az-cfg', zoneFrom: 'aws' }), { RESPOOL_ZONE: 'az-env' }, silent)).toEqual({
      zone: 'az-cfg', source: 'config',
    });
    expect(await resolveOwnZone(reads({ zoneFrom: 'aws' }), { RESPOOL_ZONE: 'az-env' }, silent)).toEqual({ zone: 'az-env', source: 'env' });
    expect(hits).toHaveLength(0);
  });

  it('asks no metadata service unless zoneFrom opts in (default off)', async () => {
    expect(DEFAULT_CONFIG.reads.zoneFrom).toBe('off');
    expect(DEFAULT_CONFIG.reads.metadataBaseUrl).toBeNull();
    expect(await resolveOwnZone(reads({}), {}, silent)).toEqual({ zone: null, source: 'none' });
    expect(await resolveOwnZone(reads({ zoneFrom: 'aws', metadataBaseUrl: null }), {}, silent)).toEqual({ zone: null, source: 'none' });
    expect(hits).toHaveLength(0);
  });

  it('aws: IMDSv2 token, then the placement zone with the token', async () => {
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(l) });
    expect(await resolveOwnZone(reads({ zoneFrom: 'aws' }), {}, log)).toEqual({ zone: 'us-east-1b', source: 'aws' });
    expect(hits.map((h) => `${h.method} ${h.url}`)).toEqual([
      'PUT /latest/api/token',
      'GET /latest/meta-data/placement/availability-zone',
    ]);
    expect(lines.join('')).toMatch(/own availability zone from the instance metadata service/);
  });

  it('aws: falls back to a bare GET when the token request is refused (IMDSv1)', async () => {
    mode = 'imdsv1';
    expect(await fetchZone('aws', baseUrl, 1000)).toBe('us-east-1b');
    expect(hits[1]!.headers['x-aws-ec2-metadata-token']).toBeUndefined();
  });

  it('gcp: the last segment of instance/zone, with Metadata-Flavor: Google', async () => {
    expect(await resolveOwnZone(reads({ zoneFrom: 'gcp' }), {}, silent)).toEqual({ zone: 'europe-west1-c', source: 'gcp' });
  });

  it('azure: location and zone number from instance/compute, with Metadata: true', async () => {
    expect(await resolveOwnZone(reads({ zoneFrom: 'azure', metadataBaseUrl: `${baseUrl}/` }), {}, silent)).toEqual({
      zone: 'westeurope-3', source: 'azure',
    });
  });

  it('gives up after metadataTimeoutMs when the service does not answer, and warns', async () => {
    mode = 'hang';
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => lines.push(l) });
    const started = Date.now();
    const result = await resolveOwnZone(reads({ zoneFrom: 'gcp', metadataTimeoutMs: 200 }), {}, log);
    const elapsed = Date.now() - started;
    expect(result).toEqual({ zone: null, source: 'none' });
    expect(elapsed).toBeGreaterThanOrEqual(190);
    expect(elapsed).toBeLessThan(1000);
    expect(hits).toHaveLength(1);
    expect(lines.join('')).toMatch(/no answer within 200 ms/);
  });

  it('aws with a hanging service: the token wait counts against the same deadline', async () => {
    mode = 'hang';
    const started = Date.now();
    await expect(fetchZone('aws', baseUrl, 250)).rejects.toThrow(/no answer within 250 ms/);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('an HTTP error or an unreachable service leaves the zone unknown', async () => {
    mode = 'error';
    expect(await resolveOwnZone(reads({ zoneFrom: 'azure' }), {}, silent)).toEqual({ zone: null, source: 'none' });
    // A closed loopback port: connection refused.
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    await expect(fetchZone('gcp', `http://127.0.0.1:${port}`, 500)).rejects.toThrow();
  });
});
