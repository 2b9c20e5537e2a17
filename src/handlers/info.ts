import { encodeVerbatim } from '../resp/encode.js';
import type { HandlerSession } from './types.js';

/**
 * `INFO clients` about respool's own clients (an upstream's clients would be respool's pooled
 * links). Field names and order as Valkey 8.0 prints them, so INFO parsers work unchanged;
 * counters respool has no equivalent for are 0.
 */
export function infoClients(session: HandlerSession): Buffer {
  let connected = 0;
  let blocked = 0;
  let pubsub = 0;
  let watching = 0;
  let tracking = 0;
  const blockingKeys = new Set<string>();
  const noKeyKeys = new Set<string>();
  const watchedKeys = new Set<string>();
  for (const s of session.ctx.sessions()) {
    connected++;
    const state = s.state;
    if (state.blocked) {
      blocked++;
      for (const k of state.blockedKeys) {
        blockingKeys.add(k);
        if (state.blockedOnNoKey) noKeyKeys.add(k);
      }
    }
    if (state.subscriptions !== null && state.subscriptions.total() > 0) pubsub++;
    if (state.tracking !== null) tracking++;
    if (state.lane !== null) {
      watching++;
      for (const k of state.lane.watched) watchedKeys.add(k);
    }
  }
  const text = [
    '# Clients',
    `connected_clients:${connected}`,
    'cluster_connections:0',
    `maxclients:${session.ctx.config.clients.maxClients}`,
    'client_recent_max_input_buffer:0',
    'client_recent_max_output_buffer:0',
    `blocked_clients:${blocked}`,
    `tracking_clients:${tracking}`,
    `pubsub_clients:${pubsub}`,
    `watching_clients:${watching}`,
    'clients_in_timeout_table:0',
    `total_watched_keys:${watchedKeys.size}`,
    `total_blocking_keys:${blockingKeys.size}`,
    `total_blocking_keys_on_nokey:${noKeyKeys.size}`,
    '',
  ].join('\r\n');
  return encodeVerbatim(text, session.state.protocol);
}
