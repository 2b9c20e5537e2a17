/**
 * The hash tag of respool's own keys: a fleet's shared state, registrations and fill locks
 * (fleet/fleet-store.ts), which no client may read or write (fleet/reserved-keys.ts) and no
 * colocation rule may take as its tag (colocation.ts). Here, below both, so each names one value.
 */
export const FLEET_TAG = '{respool-fleet}';
