import type { CommandSpec } from '../commands/command-table.js';
import { RequestFrame } from '../resp/request-framer.js';
import type { KeyColocation } from './colocation.js';
import { MAX_PREFIXED_KEYS, prefixedRequest, someArgument } from './prefixed-request.js';
import { namesKeysInReply } from './reply-names.js';
import { STORED_KEY_TOO_LONG, namesPatternsOrChannels } from './request-names.js';

/**
 * Whether renaming keys that sit at fixed places is all the rewriting does to a command (GET,
 * SET, MGET, HSET …): no patterns, channels or scope, no names in its reply. Worked out once per
 * command (CommandSpec.onlyFixedKeys), so such a request pays none of the other lookups.
 */
export function onlyFixedKeysRenamed(spec: CommandSpec): boolean {
  let only = spec.onlyFixedKeys;
  if (only === undefined) only = spec.onlyFixedKeys = spec.keysByCount != null && !namesPatternsOrChannels(spec.name) && !namesKeysInReply(spec.name);
  return only;
}

/**
 * A namespaced user's request with its keys behind `namespace`, when that is all it needs
 * (onlyFixedKeysRenamed) — the hot path: no argument views, one new buffer (prefixed-request.ts).
 * Null: the request takes the general path (requestWithStoredNames, then scope and channels).
 * STORED_KEY_TOO_LONG: a key would be longer than `maxKeyLength` once behind the namespace.
 */
export function withNamespacedKeys(frame: RequestFrame, spec: CommandSpec, namespace: Buffer, maxKeyLength: number): RequestFrame | Buffer | null {
  if (!onlyFixedKeysRenamed(spec)) return null;
  const keys = spec.keysByCount!(frame.argCount);
  if (keys.length === 0) return frame;
  if (keys.length > MAX_PREFIXED_KEYS) return null;
  const raw = prefixedRequest(frame.raw, keys, namespace, maxKeyLength);
  if (raw === null) return STORED_KEY_TOO_LONG;
  const out = new RequestFrame(raw);
  out.spec = frame.spec;
  out.command = frame.command;
  return out;
}

/**
 * Whether colocation rules (and no namespace) leave this request as it is: a command whose
 * rewriting is only its fixed keys, none of which a rule touches (colocation.ts `touches`) — the
 * GET of a key no rule names pays one walk over the headers, no argument views. False: the
 * request takes the general path (requestWithStoredNames), which renames or refuses.
 */
export function untouchedByRules(frame: RequestFrame, spec: CommandSpec, rules: KeyColocation): boolean {
  if (!onlyFixedKeysRenamed(spec)) return false;
  const keys = spec.keysByCount!(frame.argCount);
  return keys.length === 0 || !someArgument(frame.raw, keys, rules);
}
