/**
 * node:crypto and node:tls, loaded on first use rather than when respool starts. A sidecar with
 * no TLS, no users and no scripts never needs them, and on Node 24 merely loading them costs
 * 2.8 MiB (crypto) and 5.7 MiB (tls, which loads crypto) of RSS (bench/footprint.mjs; on Node 20
 * 0.7 and 1.1). `import type` from either stays free.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let cryptoModule: typeof import('node:crypto') | undefined;
let tlsModule: typeof import('node:tls') | undefined;

export function nodeCrypto(): typeof import('node:crypto') {
  return (cryptoModule ??= require('node:crypto') as typeof import('node:crypto'));
}

export function nodeTls(): typeof import('node:tls') {
  return (tlsModule ??= require('node:tls') as typeof import('node:tls'));
}

/** A value made once, on first use (process-wide random ids and secrets). */
export function onFirstUse<T extends NonNullable<unknown>>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}
