import { bulkPayload, splitAggregate, splitFrames } from '../resp/decode.js';
import { encodeBulk, encodeCommand } from '../resp/encode.js';
import { RequestFrame } from '../resp/request-framer.js';
import { globMatch } from '../util/glob.js';
import { escapeGlob, globsOverlap } from './glob-overlap.js';
import type { KeyNames } from './key-names.js';

const STAR = Buffer.from('*');
const NOTIFICATION = Buffer.from('__key');
const KEYSPACE = Buffer.from('__keyspace@');
const KEYEVENT = Buffer.from('__keyevent@');
const NOTIFICATION_END = Buffer.from('__:');
const ANY_NOTIFICATION = Buffer.from('__key*');
const EVERY_KEYEVENT = Buffer.from('__keyevent@*__:*');

/**
 * Channel names between a client and the nodes, for a user with a namespace (users[].keyPrefix;
 * key-names.ts): its channels are carried behind the namespace, so two applications' channels
 * never meet, and every name that comes back — confirmations, messages, PUBSUB's lists — is the
 * client's. Colocation rules are keys', not channels': they leave channels alone.
 *
 * Keyspace notifications name keys, not channels: `__keyspace@0__:k` is carried as the stored
 * key's channel (`__keyspace@0__:` + the stored name of k), a `__keyevent@0__:set` channel as it
 * is; at delivery the key in the channel or the payload is turned into the client's name, and a
 * notification about a key the client cannot reach (another namespace's) is not delivered.
 *
 * The SUBSCRIBE family keeps the client's names in the client's record (what its confirmations
 * and ACL checks use) and gives the hub the stored ones (handlers/pubsub.ts); PUBLISH, SPUBLISH
 * and PUBSUB's subcommands are sent with stored names (requestWithStoredChannels).
 */

/** The commands whose channels are not keys (a key spec names SPUBLISH's and SSUBSCRIBE's for routing only). */
const CHANNEL_COMMANDS: ReadonlySet<string> = new Set([
  'publish', 'spublish', 'subscribe', 'unsubscribe', 'ssubscribe', 'sunsubscribe', 'psubscribe', 'punsubscribe',
  'pubsub|channels', 'pubsub|shardchannels', 'pubsub|numsub', 'pubsub|shardnumsub',
]);

/** Whether `command` names channels (never keys: the colocation rules and a namespace's key names do not apply). */
export function namesChannels(command: string): boolean {
  return CHANNEL_COMMANDS.has(command);
}

/** The requests sent on with their channels behind the namespace: PUBLISH, SPUBLISH and PUBSUB's. */
const SENT_WITH_STORED_CHANNELS: Readonly<Record<string, { from: number; upTo?: number }>> = {
  publish: { from: 1, upTo: 2 },
  spublish: { from: 1, upTo: 2 },
  'pubsub|numsub': { from: 2 },
  'pubsub|shardnumsub': { from: 2 },
};

/**
 * PUBLISH / SPUBLISH / PUBSUB NUMSUB / SHARDNUMSUB with the channels the nodes carry; PUBSUB
 * CHANNELS / SHARDCHANNELS asking for the namespace's channels only (their pattern, or `*`, behind
 * it). Null when nothing changes (no namespace, another command).
 */
export function requestWithStoredChannels(names: KeyNames, command: string, frame: RequestFrame): RequestFrame | null {
  if (names.namespace === null) return null;
  let args: Buffer[];
  const where = SENT_WITH_STORED_CHANNELS[command];
  if (where !== undefined) {
    args = [...frame.args];
    const end = Math.min(args.length, where.upTo ?? args.length);
    for (let i = where.from; i < end; i++) args[i] = storedChannelName(names, args[i]!, false);
  } else if (command === 'pubsub|channels' || command === 'pubsub|shardchannels') {
    args = [frame.args[0]!, frame.args[1]!, storedChannelName(names, frame.args[2] ?? STAR, true), ...frame.args.slice(3)];
  } else {
    return null;
  }
  const out = RequestFrame.of(args, encodeCommand(args));
  out.spec = frame.spec;
  out.command = frame.command;
  return out;
}

/** A client's channel (or pattern) as the hub and the nodes carry it. */
export function storedChannelName(names: KeyNames, channel: Buffer, pattern: boolean): Buffer {
  if (!startsWith(channel, NOTIFICATION)) return names.storedChannel(channel, pattern) ?? channel;
  const split = keyspaceChannel(channel);
  if (split === null) return channel; // __keyevent@…: its messages' keys are turned into the client's at delivery
  if (!pattern) return Buffer.concat([split.head, names.storedName(split.key) ?? split.key]);
  // A pattern over keys: behind the stored names' common prefix, when they have one.
  const prefix = names.nodePatternPrefix;
  return prefix === null || prefix.length === 0 ? channel : Buffer.concat([split.head, prefix, split.key]);
}

/** The client's pattern for a stored one (a pmessage's first name). */
function clientPattern(names: KeyNames, stored: Buffer): Buffer {
  if (!startsWith(stored, NOTIFICATION)) return names.clientChannel(stored, true) ?? stored;
  const split = keyspaceChannel(stored);
  const prefix = names.nodePatternPrefix;
  if (split === null || prefix === null || !startsWith(split.key, prefix)) return stored;
  return Buffer.concat([split.head, split.key.subarray(prefix.length)]);
}

/** A message's channel as the client's, or null when the message is not the client's to see. */
function clientChannelOf(names: KeyNames, stored: Buffer): Buffer | null {
  if (!startsWith(stored, NOTIFICATION)) return names.clientChannel(stored, false);
  const split = keyspaceChannel(stored);
  if (split === null) return stored;
  const key = names.visibleName(split.key);
  return key === null ? null : key === split.key ? stored : Buffer.concat([split.head, key]);
}

/** `__keyspace@<db>__:` and the key after it; null for any other channel. */
function keyspaceChannel(channel: Buffer): { head: Buffer; key: Buffer } | null {
  if (!startsWith(channel, KEYSPACE)) return null;
  const at = channel.indexOf(NOTIFICATION_END, KEYSPACE.length);
  if (at < 0) return null;
  return { head: channel.subarray(0, at + NOTIFICATION_END.length), key: channel.subarray(at + NOTIFICATION_END.length) };
}

/**
 * A namespaced client's pattern that does not name notifications but can match them (`*`,
 * `_*`, …): on one server it receives the keyspace notifications of every key, which the
 * namespace's channel pattern (`ns*`) cannot. Such patterns share two more hub patterns that
 * catch the namespace's notifications (notificationPatterns); each delivery through them is
 * matched against the client's patterns under the client's names (clientMessages).
 */
export function catchesNotifications(names: KeyNames, pattern: Buffer): boolean {
  return names.namespace !== null && !startsWith(pattern, NOTIFICATION) && globsOverlap(pattern, ANY_NOTIFICATION);
}

/** Each user's notificationPatterns, made once: they are looked at for every pmessage it is delivered. */
const patternsOf = new WeakMap<KeyNames, Buffer[]>();

/** The hub patterns that catch a namespace's keyspace and key-event notifications (any database). */
export function notificationPatterns(names: KeyNames): Buffer[] {
  if (names.namespace === null) return [];
  let patterns = patternsOf.get(names);
  if (patterns === undefined) patternsOf.set(names, (patterns = [Buffer.concat([Buffer.from('__keyspace@*__:'), escapeGlob(names.namespace), STAR]), EVERY_KEYEVENT]));
  return patterns;
}

/**
 * A run of message pushes as the hub delivers them (`message ch payload`, `pmessage pat ch
 * payload`, `smessage ch payload`; RESP2 or RESP3) with the client's names, leaving out the
 * notifications about keys it cannot reach (possibly every one: an empty buffer).
 */
export function clientMessages(names: KeyNames, frames: Buffer, patterns: () => Buffer[] = () => []): Buffer {
  if (names.namespace === null && frames.indexOf(NOTIFICATION) < 0) return frames; // colocation alone renames only notifications' keys
  const out: Buffer[] = [];
  for (const frame of splitFrames(frames)) {
    const message = clientMessage(names, frame, patterns);
    if (message !== null) out.push(message);
  }
  return out.length === 1 ? out[0]! : Buffer.concat(out);
}

function clientMessage(names: KeyNames, frame: Buffer, patterns: () => Buffer[]): Buffer | null {
  const parts = splitAggregate(frame);
  if (parts === null || parts.length < 3) return frame;
  const kind = bulkPayload(parts[0]!)?.toString('latin1');
  if (kind === 'pmessage' && parts.length === 4 && isNotificationPattern(names, bulkPayload(parts[1]!))) return caughtNotification(names, frame, parts, patterns());
  const at = kind === 'pmessage' && parts.length === 4 ? 2 : kind === 'message' || kind === 'smessage' ? 1 : -1;
  if (at < 0) return frame;
  const out = [...parts];
  const stored = bulkPayload(parts[at]!);
  if (stored === null) return frame;
  const channel = clientChannelOf(names, stored);
  if (channel === null) return null;
  out[at] = channel === stored ? parts[at]! : encodeBulk(channel, 2);
  if (startsWith(stored, KEYEVENT)) {
    // A key event's payload is the key.
    const key = bulkPayload(parts[at + 1]!);
    const name = key === null ? null : names.visibleName(key);
    if (name === null) return null;
    out[at + 1] = encodeBulk(name, 2);
  }
  if (at === 2) {
    const pattern = bulkPayload(parts[1]!);
    if (pattern !== null) out[1] = encodeBulk(clientPattern(names, pattern), 2);
  }
  return Buffer.concat([Buffer.from(`${String.fromCharCode(frame[0]!)}${out.length}\r\n`, 'latin1'), ...out]);
}

function isNotificationPattern(names: KeyNames, pattern: Buffer | null): boolean {
  return pattern !== null && notificationPatterns(names).some((p) => p.equals(pattern));
}

/**
 * A notification one of notificationPatterns caught: one pmessage per client pattern that
 * catchesNotifications and matches the channel under the client's names (as one server sends one
 * per matching pattern), or null for none (another namespace's key, or no such pattern matches).
 */
function caughtNotification(names: KeyNames, frame: Buffer, parts: Buffer[], patterns: Buffer[]): Buffer | null {
  const stored = bulkPayload(parts[2]!);
  const channel = stored === null ? null : clientChannelOf(names, stored);
  if (channel === null) return null;
  let payload = parts[3]!;
  if (startsWith(stored!, KEYEVENT)) {
    const key = bulkPayload(payload);
    const name = key === null ? null : names.visibleName(key);
    if (name === null) return null;
    payload = encodeBulk(name, 2);
  }
  const head = Buffer.from(`${String.fromCharCode(frame[0]!)}4\r\n`, 'latin1');
  const caught = bulkPayload(parts[1]!)!;
  const out: Buffer[] = [];
  for (const pattern of patterns) {
    // A pattern that catches notifications unnamed, matched here; or one whose own hub pattern this is.
    const matches = catchesNotifications(names, pattern) ? globMatch(pattern, channel) : storedChannelName(names, pattern, true).equals(caught);
    if (matches) out.push(head, parts[0]!, encodeBulk(pattern, 2), encodeBulk(channel, 2), payload);
  }
  return out.length === 0 ? null : Buffer.concat(out);
}

/** A shard channel the hub lost (its slot moved) as the client subscribed to it. */
export function clientShardChannel(names: KeyNames, stored: Buffer): Buffer {
  return names.clientChannel(stored, false) ?? stored;
}

/** PUBSUB CHANNELS / SHARDCHANNELS's list (the namespace's channels only: the request asked for those), as the client's names. */
export function clientChannelList(names: KeyNames, reply: Buffer): Buffer {
  const items = reply[0] === 0x2a || reply[0] === 0x7e ? splitAggregate(reply) : null;
  if (items === null) return reply;
  const out: Buffer[] = [];
  for (const item of items) {
    const stored = bulkPayload(item);
    const name = stored === null ? null : clientChannelOf(names, stored);
    if (name !== null) out.push(encodeBulk(name, 2));
  }
  return Buffer.concat([Buffer.from(`${String.fromCharCode(reply[0]!)}${out.length}\r\n`, 'latin1'), ...out]);
}

/** PUBSUB NUMSUB / SHARDNUMSUB's channel, count pairs (a map in RESP3), with the channels the client asked about. */
export function clientNumsub(asked: readonly Buffer[], reply: Buffer): Buffer {
  const items = reply[0] === 0x2a || reply[0] === 0x25 ? splitAggregate(reply) : null;
  if (items === null || items.length !== asked.length * 2) return reply;
  const out = items.map((item, i) => (i % 2 === 0 ? encodeBulk(asked[i / 2]!, 2) : item));
  const count = reply[0] === 0x25 ? asked.length : out.length;
  return Buffer.concat([Buffer.from(`${String.fromCharCode(reply[0]!)}${count}\r\n`, 'latin1'), ...out]);
}

function startsWith(name: Buffer, prefix: Buffer): boolean {
  return name.length >= prefix.length && name.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}
