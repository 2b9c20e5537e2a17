/**
 * Assertions of the queue invariants respool relies on (a link's reply FIFO, a session's reply
 * order), on in development builds only: when src/ runs under vitest, or with
 * RESPOOL_DEV_CHECKS=1. The bundle that bin/respool.js runs is built with the switch defined
 * false (scripts/bundle.mjs), so esbuild drops the checks: production pays nothing for them.
 */
export const DEV_CHECKS: boolean = process.env.RESPOOL_DEV_CHECKS === '1' || process.env.VITEST !== undefined;

/** Throws when a relied-on invariant does not hold (development builds: guard calls with DEV_CHECKS). */
export function invariant(holds: boolean, what: string): asserts holds {
  if (!holds) throw new Error(`respool invariant broken: ${what}`);
}
