/**
 * respool's own availability zone, decided once at start:
 *
 *   1. reads.zone (config file or --zone)
 *   2. the environment variable RESPOOL_ZONE
 *   3. only when the operator opts in (reads.zoneFrom: aws | gcp | azure; default off): that
 *      cloud's instance metadata service at reads.metadataBaseUrl, with one deadline
 *      (reads.metadataTimeoutMs) for the whole lookup. respool has no built-in metadata
 *      address: the URL must be configured, so nothing is ever contacted by accident.
 *   4. otherwise unknown (null): AZ strategies then behave as preferReplica (read-strategy.ts).
 *
 * Never throws and never waits past the deadline; the outcome is logged either way.
 *
 * Metadata requests (the documented endpoints of each cloud, relative to the base URL):
 *   aws    PUT  /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds: 60)       → token (IMDSv2)
 *          GET  /latest/meta-data/placement/availability-zone (X-aws-ec2-metadata-token)
 *               → "us-east-1a"; without a token (IMDSv1 only) the GET is tried bare
 *   gcp    GET  /computeMetadata/v1/instance/zone (Metadata-Flavor: Google)
 *               → "projects/123/zones/us-central1-a" → "us-central1-a"
 *   azure  GET  /metadata/instance/compute?api-version=2021-02-01 (Metadata: true)
 *               → JSON { location: "eastus", zone: "2" } → "eastus-2" (zone numbers alone
 *               are ambiguous across regions)
 */
import type { Logger } from 'pino';
import type { ReadsConfig } from '../config/types.js';

export const ZONE_ENV = 'RESPOOL_ZONE';

export type ZoneSource = 'config' | 'env' | 'aws' | 'gcp' | 'azure' | 'none';

export interface OwnZone {
  zone: string | null;
  source: ZoneSource;
}

type ReadsZoneSettings = Pick<ReadsConfig, 'zone' | 'zoneFrom' | 'metadataBaseUrl' | 'metadataTimeoutMs'>;

/** Decides respool's own zone (see the file comment). Resolves within metadataTimeoutMs (+ a little). */
export async function resolveOwnZone(reads: ReadsZoneSettings, env: NodeJS.ProcessEnv, log: Logger): Promise<OwnZone> {
  if (reads.zone !== null) {
    log.info({ zone: reads.zone, source: 'config' }, 'own availability zone');
    return { zone: reads.zone, source: 'config' };
  }
  const fromEnv = env[ZONE_ENV]?.trim();
  if (fromEnv) {
    log.info({ zone: fromEnv, source: 'env' }, 'own availability zone');
    return { zone: fromEnv, source: 'env' };
  }
  if (reads.zoneFrom === 'off') {
    log.debug('own availability zone unknown (no reads.zone, no RESPOOL_ZONE, reads.zoneFrom off)');
    return { zone: null, source: 'none' };
  }
  if (reads.metadataBaseUrl === null) {
    log.warn({ zoneFrom: reads.zoneFrom }, 'reads.zoneFrom is set without reads.metadataBaseUrl: not asking any metadata service');
    return { zone: null, source: 'none' };
  }
  const started = Date.now();
  try {
    const zone = await fetchZone(reads.zoneFrom, reads.metadataBaseUrl, reads.metadataTimeoutMs);
    log.info({ zone, source: reads.zoneFrom, url: reads.metadataBaseUrl, ms: Date.now() - started }, 'own availability zone from the instance metadata service');
    return { zone, source: reads.zoneFrom };
  } catch (err) {
    log.warn(
      { zoneFrom: reads.zoneFrom, url: reads.metadataBaseUrl, ms: Date.now() - started, err: (err as Error).message },
      'could not read the availability zone from the instance metadata service; own zone unknown',
    );
    return { zone: null, source: 'none' };
  }
}

/** Asks one cloud's metadata service; rejects on any failure or after timeoutMs in total. */
export async function fetchZone(cloud: 'aws' | 'gcp' | 'azure', baseUrl: string, timeoutMs: number): Promise<string> {
  const base = baseUrl.replace(/\/+$/, '');
  // undici is loaded only here: it is ~10 MiB of a sidecar's idle RSS, and most never ask.
  const { Agent, request } = await import('undici');
  const signal = AbortSignal.timeout(timeoutMs);
  // A private dispatcher: no pooled sockets outlive the lookup.
  const dispatcher = new Agent({ connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, keepAliveTimeout: 1 });
  const get = async (method: 'GET' | 'PUT', path: string, headers: Record<string, string>): Promise<string> => {
    const res = await request(`${base}${path}`, { method, headers, signal, dispatcher });
    const body = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${method} ${path}: HTTP ${res.statusCode}`);
    return body.trim();
  };
  try {
    let zone: string;
    switch (cloud) {
      case 'aws': {
        let token: string | null = null;
        try {
          token = await get('PUT', '/latest/api/token', { 'x-aws-ec2-metadata-token-ttl-seconds': '60' });
        } catch (err) {
          if (signal.aborted) throw err;
          token = null; // IMDSv1-only service: try without a token
        }
        zone = await get('GET', '/latest/meta-data/placement/availability-zone', token ? { 'x-aws-ec2-metadata-token': token } : {});
        break;
      }
      case 'gcp': {
        const full = await get('GET', '/computeMetadata/v1/instance/zone', { 'metadata-flavor': 'Google' });
        zone = full.slice(full.lastIndexOf('/') + 1);
        break;
      }
      case 'azure': {
        const text = await get('GET', '/metadata/instance/compute?api-version=2021-02-01', { metadata: 'true' });
        const compute = JSON.parse(text) as { location?: unknown; zone?: unknown };
        const location = typeof compute.location === 'string' ? compute.location : '';
        const number = typeof compute.zone === 'string' ? compute.zone : '';
        if (!number) throw new Error('the VM has no availability zone (compute.zone is empty)');
        zone = location ? `${location}-${number}` : number;
        break;
      }
    }
    if (!/^\S{1,128}$/.test(zone)) throw new Error(`unexpected zone ${JSON.stringify(zone.slice(0, 60))}`);
    return zone;
  } catch (err) {
    if (signal.aborted) throw new Error(`no answer within ${timeoutMs} ms`);
    throw err;
  } finally {
    void dispatcher.destroy().catch(() => {});
  }
}
