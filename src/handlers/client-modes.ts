import type { CommandFamily } from '../commands/proxy-handling.js';

/**
 * Which requests run where in each client mode: the one table dispatch (index.ts), the WATCH
 * lane (watch-lane.ts) and CLIENT TRACKING (tracking.ts) consult.
 *
 *   watchLane : a WATCH … EXEC lane is open. 'lane': sent on the client's leased connection
 *               (commands about the client's own connection still answered by respool:
 *               LANE_OWN_COMMANDS); 'own': keeps its own path (it would corrupt the lease's state)
 *   tracking  : CLIENT TRACKING is on. 'lane': on the tracking lane of its slot; 'own': keeps its
 *               own path (respool answers it, or it has a lease of its own); 'shared': whole-data-set
 *               commands in a cluster go on shared links once the lanes answered what they owe
 *               (they read no keys Valkey would track), on a lane against a standalone server
 *   RESP2 with subscriptions: by command, not family — SUBSCRIBED_COMMANDS (Valkey's processCommand)
 */
const MODES: Readonly<Record<CommandFamily, { readonly watchLane: 'lane' | 'own'; readonly tracking: 'lane' | 'own' | 'shared' }>> = {
  local: { watchLane: 'lane', tracking: 'own' },
  info: { watchLane: 'lane', tracking: 'own' },
  transaction: { watchLane: 'lane', tracking: 'own' },
  cluster: { watchLane: 'own', tracking: 'own' },
  clients: { watchLane: 'own', tracking: 'own' },
  blocking: { watchLane: 'lane', tracking: 'own' },
  monitor: { watchLane: 'own', tracking: 'own' },
  replication: { watchLane: 'own', tracking: 'lane' },
  tracking: { watchLane: 'own', tracking: 'own' },
  pubsub: { watchLane: 'own', tracking: 'own' },
  script: { watchLane: 'lane', tracking: 'lane' },
  allShards: { watchLane: 'lane', tracking: 'shared' },
  anyNode: { watchLane: 'lane', tracking: 'lane' },
  keyed: { watchLane: 'lane', tracking: 'lane' },
  multiKey: { watchLane: 'lane', tracking: 'lane' },
  refused: { watchLane: 'own', tracking: 'own' },
};

/** While a WATCH lane is open: whether this family goes on it. */
export function runsOnWatchLane(family: CommandFamily): boolean {
  return MODES[family].watchLane === 'lane';
}

/** While CLIENT TRACKING is on: on the slot's lane, its own path, or shared links after the lanes. */
export function trackingPath(family: CommandFamily): 'lane' | 'own' | 'shared' {
  return MODES[family].tracking;
}

/**
 * Commands respool answers in whole or in part (its own CONFIG settings: node-settings.ts; its
 * latency events beside the nodes': latency-events.ts): a tracking client's go their family's
 * way, never raw on a lane. They read no keys Valkey would track.
 */
export const TRACKING_RESPOOL_ANSWERS: ReadonlySet<string> = new Set([
  'config|get', 'config|set', 'config|resetstat', 'latency|latest', 'latency|history', 'latency|doctor', 'latency|reset', 'latency|graph',
]);

/** Commands about the client's own connection: answered by respool even inside a WATCH lane. */
export const LANE_OWN_COMMANDS: ReadonlySet<string> = new Set(['auth', 'hello', 'client|setname', 'client|getname', 'client|id', 'client|info', 'client|setinfo', 'quit', 'readonly', 'readwrite']);

/** In RESP2 subscribed mode only these commands run (Valkey's processCommand); the others are refused. */
const SUBSCRIBED_COMMANDS: ReadonlySet<string> = new Set([
  'subscribe', 'psubscribe', 'ssubscribe', 'unsubscribe', 'punsubscribe', 'sunsubscribe', 'ping', 'quit', 'reset',
]);

export function allowedWhileSubscribed(command: string): boolean {
  return SUBSCRIBED_COMMANDS.has(command);
}
