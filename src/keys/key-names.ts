import type { KeyColocation } from './colocation.js';
import { escapeGlob } from './glob-overlap.js';
import { FunctionNames } from './function-names.js';

const STAR = Buffer.from('*');

/**
 * The names one user's requests and replies use, against the names the nodes store: its
 * namespace (users[].keyPrefix) outside, the colocation rules (colocation.ts) inside.
 *
 *   client name  k  →  stored  namespace + (colocated form of k, or k)
 *   stored name  s  →  client  s without the namespace, then colocation's client name;
 *                      hidden when s is outside the namespace (another application's key)
 *
 * The namespace holds no brace (config schema), so a stored name keeps the client's hash tag and
 * the slots of a request's keys stay as they are: what was one slot stays one slot, CROSSSLOT
 * stays CROSSSLOT. Channels take the namespace too (not the colocation rules: they are keys').
 * Users without a namespace share one instance (or none: no rules, nothing to rewrite).
 */
export class KeyNames {
  /**
   * What KEYS's pattern and SCAN's MATCH are sent behind, escaped, when the nodes can filter a
   * client's pattern exactly (no colocation rules, or one for every key); else null, and the
   * nodes are asked for `scopePattern`, respool applying the client's pattern to the names.
   */
  readonly nodePatternPrefix: Buffer | null;
  /** Every key a client of this user can reach, as a glob: the namespace's, or `*`. */
  readonly scopePattern: Buffer;
  /** SORT's BY and GET patterns are sent behind this (raw: they are not globs), or kept as they are when null. */
  readonly sortPrefix: Buffer | null;
  /** The namespace when it is the only change to a key's name (no colocation rules): every stored name is it + the client's. */
  readonly prefixOnly: Buffer | null;
  /** The colocation rules when they are the only change to key names (no namespace), else null. */
  readonly rulesOnly: KeyColocation | null;
  /** Function library and function names behind the namespace (function-names.ts), or null without one. */
  readonly functions: FunctionNames | null;

  constructor(
    /** users[].keyPrefix, or null. */
    readonly namespace: Buffer | null,
    private readonly colocation: KeyColocation | null,
  ) {
    const inner = colocation === null ? Buffer.alloc(0) : colocation.everyKeyPrefix;
    const outer = namespace ?? Buffer.alloc(0);
    this.sortPrefix = inner === null ? null : Buffer.concat([outer, inner]);
    this.nodePatternPrefix = this.sortPrefix === null ? null : escapeGlob(this.sortPrefix);
    this.scopePattern = namespace === null ? STAR : Buffer.concat([escapeGlob(namespace), STAR]);
    this.prefixOnly = colocation === null ? namespace : null;
    this.rulesOnly = namespace === null ? colocation : null;
    this.functions = namespace === null ? null : new FunctionNames(namespace);
  }

  /** The stored name of a client's key, or null when it is stored as it is. */
  storedName(key: Buffer): Buffer | null {
    const colocated = this.colocation?.storedName(key) ?? null;
    if (this.namespace === null) return colocated;
    return Buffer.concat([this.namespace, colocated ?? key]);
  }

  /**
   * The stored forms of the names that start with `prefix` (BCAST's PREFIX): behind the namespace,
   * as they are (unless a rule takes every key) and behind each rule's tag.
   */
  storedPrefixes(prefix: Buffer): Buffer[] {
    const ns = this.namespace ?? Buffer.alloc(0);
    if (this.colocation === null) return [Buffer.concat([ns, prefix])];
    const forms = this.colocation.everyKeyPrefix !== null ? [] : [Buffer.concat([ns, prefix])];
    for (const tag of this.colocation.tagPrefixes()) forms.push(Buffer.concat([ns, tag, prefix]));
    return forms;
  }

  /** A client name that has no stored form of its own (colocation.ts, `collides`). */
  collides(key: Buffer): boolean {
    return this.colocation?.collides(key) ?? false;
  }

  /**
   * The client's name for a stored name the client's own request reached (a popped key, a
   * stream read), or null when it is the same.
   */
  clientName(stored: Buffer): Buffer | null {
    const rest = this.namespace === null ? stored : afterPrefix(stored, this.namespace);
    if (rest === null) return null;
    const name = this.colocation?.ruleName(rest) ?? null;
    return name ?? (rest === stored ? null : rest);
  }

  /** What a client sees of any stored name (KEYS, SCAN): its own name, or null for one it cannot reach. */
  visibleName(stored: Buffer): Buffer | null {
    const rest = this.namespace === null ? stored : afterPrefix(stored, this.namespace);
    if (rest === null) return null;
    return this.colocation === null ? rest : this.colocation.visibleName(rest);
  }

  /**
   * The globs over stored names that cover the client names one ACL key pattern covers (a
   * mirrored identity's key patterns, upstream/identity-mirror.ts): the namespace before each
   * form a key can be stored in — as it is (unless a rule takes every key) and under each tag.
   */
  storedPatterns(pattern: Buffer): Buffer[] {
    const ns = this.namespace === null ? Buffer.alloc(0) : escapeGlob(this.namespace);
    const forms: Buffer[] = [];
    if (this.colocation === null || this.colocation.everyKeyPrefix === null) forms.push(Buffer.concat([ns, pattern]));
    for (const tag of this.colocation?.tagPrefixes() ?? []) forms.push(Buffer.concat([ns, escapeGlob(tag), pattern]));
    return forms;
  }

  /** A channel (or channel pattern) as the nodes carry it, or null when it is the client's. */
  storedChannel(channel: Buffer, pattern: boolean): Buffer | null {
    if (this.namespace === null) return null;
    return Buffer.concat([pattern ? escapeGlob(this.namespace) : this.namespace, channel]);
  }

  /** The client's name of a channel (or pattern) the nodes carry, or null when it is not in the namespace. */
  clientChannel(stored: Buffer, pattern: boolean): Buffer | null {
    if (this.namespace === null) return stored;
    return afterPrefix(stored, pattern ? escapeGlob(this.namespace) : this.namespace);
  }
}

/** What follows `prefix` in `name` (a view; empty when they are equal), or null when `name` does not start with it. */
function afterPrefix(name: Buffer, prefix: Buffer): Buffer | null {
  if (name.length < prefix.length || name.compare(prefix, 0, prefix.length, 0, prefix.length) !== 0) return null;
  return name.subarray(prefix.length);
}
