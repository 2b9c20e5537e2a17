/**
 * The subscription confirmations Valkey sends, byte for byte, so a client of respool cannot tell
 * them from the server's own (Valkey 8.0.1, src/pubsub.c):
 *
 *   addReplyPubsubSubscribed / addReplyPubsubPatSubscribed:
 *     RESP2 `*3\r\n$9\r\nsubscribe\r\n$<n>\r\n<channel>\r\n:<count>\r\n`
 *     RESP3 the same with `>3\r\n` (addReplyPushLen) instead of `*3\r\n`
 *   addReplyPubsubUnsubscribed / addReplyPubsubPatUnsubscribed: the same shape; when the client
 *     unsubscribes from everything while holding nothing, the channel is addReplyNull:
 *     RESP2 `$-1\r\n`, RESP3 `_\r\n` (networking.c addReplyNull), and the count is 0.
 *
 * The kind words are server.c's shared objects (subscribebulk `$9\r\nsubscribe\r\n`,
 * unsubscribebulk, psubscribebulk, punsubscribebulk, ssubscribebulk, sunsubscribebulk).
 *
 * Which count each carries (pubsubtype.subscriptionCount, clientSubscriptionsCount and
 * clientShardSubscriptionsCount in pubsub.c), always the count *after* the change:
 *   subscribe, unsubscribe, psubscribe, punsubscribe → channels + patterns of the client
 *   ssubscribe, sunsubscribe                         → shard channels of the client only
 * (see ClientSubscriptions.count() and .shardCount()).
 *
 * Not in subscribed mode at all (no channel, pattern or shard channel held, any protocol),
 * Valkey 8.0.0 and 8.0.1 answer UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE with an error instead
 * (server.c processCommand): `-NOSUB 'unsubscribe' command executed not in subscribed mode`
 * (errors.ts ProxyError.notSubscribed; handlers/pubsub.ts refusesUnsubscribeUnsubscribed). Redis
 * and later Valkey confirm each name with count 0.
 *
 * Valkey sends one confirmation per argument, in argument order, even for a name the client
 * already holds (subscribe: count unchanged) or does not hold (unsubscribe: count unchanged);
 * UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE without arguments send one per name held (in the
 * server's dict order) or, holding none, the single nil-channel confirmation with count 0.
 */

export type ConfirmationKind = 'subscribe' | 'unsubscribe' | 'psubscribe' | 'punsubscribe' | 'ssubscribe' | 'sunsubscribe';

const CRLF = Buffer.from('\r\n');
const KIND_BULKS: Record<ConfirmationKind, Buffer> = {
  subscribe: Buffer.from('$9\r\nsubscribe\r\n'),
  unsubscribe: Buffer.from('$11\r\nunsubscribe\r\n'),
  psubscribe: Buffer.from('$10\r\npsubscribe\r\n'),
  punsubscribe: Buffer.from('$12\r\npunsubscribe\r\n'),
  ssubscribe: Buffer.from('$10\r\nssubscribe\r\n'),
  sunsubscribe: Buffer.from('$12\r\nsunsubscribe\r\n'),
};
const HEADER = { 2: Buffer.from('*3\r\n'), 3: Buffer.from('>3\r\n') } as const;
const NULL = { 2: Buffer.from('$-1\r\n'), 3: Buffer.from('_\r\n') } as const;

/**
 * One confirmation frame. `name` null = the "held nothing" reply of a mass unsubscribe (only
 * meaningful for the unsubscribe kinds; Valkey then reports count 0).
 */
export function encodeConfirmation(protocol: 2 | 3, kind: ConfirmationKind, name: Buffer | string | null, count: number): Buffer {
  const header = HEADER[protocol];
  const kindBulk = KIND_BULKS[kind];
  const countLine = Buffer.from(`:${count}\r\n`, 'latin1');
  if (name === null) return Buffer.concat([header, kindBulk, NULL[protocol], countLine]);
  const data = typeof name === 'string' ? Buffer.from(name, 'utf8') : name;
  const lengthLine = Buffer.from(`$${data.length}\r\n`, 'latin1');
  return Buffer.concat([header, kindBulk, lengthLine, data, CRLF, countLine]);
}

export const subscribed = (protocol: 2 | 3, channel: Buffer | string, count: number) =>
  encodeConfirmation(protocol, 'subscribe', channel, count);
export const unsubscribed = (protocol: 2 | 3, channel: Buffer | string | null, count: number) =>
  encodeConfirmation(protocol, 'unsubscribe', channel, count);
export const psubscribed = (protocol: 2 | 3, pattern: Buffer | string, count: number) =>
  encodeConfirmation(protocol, 'psubscribe', pattern, count);
export const punsubscribed = (protocol: 2 | 3, pattern: Buffer | string | null, count: number) =>
  encodeConfirmation(protocol, 'punsubscribe', pattern, count);
export const ssubscribed = (protocol: 2 | 3, channel: Buffer | string, count: number) =>
  encodeConfirmation(protocol, 'ssubscribe', channel, count);
export const sunsubscribed = (protocol: 2 | 3, channel: Buffer | string | null, count: number) =>
  encodeConfirmation(protocol, 'sunsubscribe', channel, count);

/**
 * A message frame as Valkey's addReplyPubsubMessage / addReplyPubsubPatMessage writes it (the
 * hub forwards upstream bytes and never needs these; for tests and for local replies).
 */
export function encodeMessage(protocol: 2 | 3, kind: 'message' | 'smessage', channel: Buffer | string, payload: Buffer | string): Buffer {
  return encodeAggregate(protocol, [kind, channel, payload]);
}

export function encodePatternMessage(protocol: 2 | 3, pattern: Buffer | string, channel: Buffer | string, payload: Buffer | string): Buffer {
  return encodeAggregate(protocol, ['pmessage', pattern, channel, payload]);
}

function encodeAggregate(protocol: 2 | 3, items: Array<Buffer | string>): Buffer {
  const parts: Buffer[] = [Buffer.from(`${protocol === 2 ? '*' : '>'}${items.length}\r\n`, 'latin1')];
  for (const item of items) {
    const data = typeof item === 'string' ? Buffer.from(item, 'utf8') : item;
    parts.push(Buffer.from(`$${data.length}\r\n`, 'latin1'), data, CRLF);
  }
  return Buffer.concat(parts);
}

/**
 * PING's reply from a RESP2 client in subscribed mode (server.c pingCommand):
 * `*2\r\n$4\r\npong\r\n$<n>\r\n<message or empty>\r\n`. RESP3 clients (and RESP2 clients not
 * subscribed) get the ordinary +PONG / bulk reply.
 */
export function subscribedPong(message: Buffer | string | null): Buffer {
  return encodeAggregate(2, ['pong', message ?? '']);
}
