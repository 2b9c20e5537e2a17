/**
 * The prom-client classes respool uses, taken from the files of prom-client's lib/ that define
 * them rather than from its index. The index also loads its Pushgateway, which requires
 * node:https and with it node:tls and node:crypto: on Node 24 that is 5–6 MiB of RSS in every
 * sidecar that never pushes a metric and has no TLS configured (bench/footprint.mjs). Types
 * still come from 'prom-client' (`import type`, free at run time); test/unit/prom-client-parts
 * checks that these are the index's own classes, so an upgrade that moves a file fails there.
 */
import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

const require = createRequire(import.meta.url);

export const PromCounter = require('prom-client/lib/counter') as typeof PromClient.Counter;
export const PromGauge = require('prom-client/lib/gauge') as typeof PromClient.Gauge;
export const PromRegistry = require('prom-client/lib/registry') as typeof PromClient.Registry;
export const collectDefaultMetrics = require('prom-client/lib/defaultMetrics') as typeof PromClient.collectDefaultMetrics;

/** The workers' metrics aggregator (node:cluster IPC); loaded only by the modes that use it. */
export function aggregatorRegistry(): typeof PromClient.AggregatorRegistry {
  return require('prom-client/lib/cluster') as typeof PromClient.AggregatorRegistry;
}
