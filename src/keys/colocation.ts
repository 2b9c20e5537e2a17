import { globMatch } from '../util/glob.js';
import { globsOverlap } from './glob-overlap.js';
import { FLEET_TAG } from './reserved-tag.js';

/** One colocation rule as the config gives it: keys matching `keys` are stored under `{tag}`. */
export interface ColocationRule {
  readonly keys: string;
  readonly tag: string;
}

interface CompiledRule {
  readonly glob: Buffer;
  /** `{tag}`: what the stored name starts with, so every key of the rule hashes to one slot. */
  readonly prefix: Buffer;
  /** The glob's literal start when the glob is that followed by one `*` (`rq:*`, `*`), else null: compared in place (ruleMatches). */
  readonly literalStart: Buffer | null;
}

const OPEN_BRACE = 0x7b;

/**
 * Colocation rules (config `colocate`): the names a client says and the names the nodes store.
 *
 *   client name  k  matches rule R (the first that does)  →  stored as  "{R.tag}" + k
 *   client name  k  matches no rule                        →  stored as  k
 *
 * Read back, a stored name "{T}" + k is the client's k when k matches a rule of tag T; any other
 * stored name is its own client name, unless it matches a rule (a key stored before the rule
 * existed: no client name reaches it, so KEYS and SCAN leave it out; RESPOOL COLOCATE CHECK lists
 * such keys). One stored name per client name and back needs one more rule: a client name that
 * matches no rule but looks like a rule's stored form ("{T}" + k, k matching a rule of tag T) has
 * no name of its own on the nodes, so it is refused (`collides`).
 */
export class KeyColocation {
  private readonly rules: CompiledRule[];
  /** Every rule's prefix once, with the rules of that tag. */
  private readonly byPrefix: Array<{ prefix: Buffer; globs: Buffer[] }>;
  /** The prefix of the first rule when it is `*` (every key): KEYS and SCAN patterns are then sent prefixed (request-names.ts). */
  readonly everyKeyPrefix: Buffer | null;

  constructor(rules: readonly ColocationRule[]) {
    this.rules = rules.map((r) => {
      const glob = Buffer.from(r.keys, 'utf8');
      return { glob, prefix: Buffer.from(`{${r.tag}}`, 'utf8'), literalStart: literalStartOf(glob) };
    });
    this.byPrefix = [];
    for (const rule of this.rules) {
      const known = this.byPrefix.find((p) => p.prefix.equals(rule.prefix));
      if (known !== undefined) known.globs.push(rule.glob);
      else this.byPrefix.push({ prefix: rule.prefix, globs: [rule.glob] });
    }
    const first = this.rules[0];
    this.everyKeyPrefix = first !== undefined && first.glob.length === 1 && first.glob[0] === 0x2a /* * */ ? first.prefix : null;
  }

  /** Each rule's glob, in the order of the rules. */
  globs(): Buffer[] {
    return this.rules.map((r) => r.glob);
  }

  /** Each tag's `{tag}` once: what a stored name of some rule starts with. */
  tagPrefixes(): Buffer[] {
    return this.byPrefix.map((p) => p.prefix);
  }

  /** The stored name of a client's key, or null when it is stored as it is. */
  storedName(key: Buffer): Buffer | null {
    for (const rule of this.rules) {
      if (ruleMatches(rule, key, 0, key.length)) return Buffer.concat([rule.prefix, key]);
    }
    return null;
  }

  /**
   * Whether the key in buf[start, end) needs the rules' attention: it matches a rule, or starts
   * with `{` (it could be a rule's stored form: `collides`). False is the common case of a rule
   * no key matches — a GET of another application's key — answered without a view of the key
   * for a rule of the shape `literal*` (keys/naming-plan.ts).
   */
  touches(buf: Buffer, start: number, end: number): boolean {
    if (end > start && buf[start] === OPEN_BRACE) return true;
    for (const rule of this.rules) if (ruleMatches(rule, buf, start, end)) return true;
    return false;
  }

  /** A client name that matches no rule but is another key's stored form (see the class comment). */
  collides(key: Buffer): boolean {
    return this.ruleName(key) !== null;
  }

  /** The client's name for a stored rule key ("{T}" + k → k), or null when `stored` is not one. */
  ruleName(stored: Buffer): Buffer | null {
    for (const { prefix, globs } of this.byPrefix) {
      if (stored.length <= prefix.length || stored.compare(prefix, 0, prefix.length, 0, prefix.length) !== 0) continue;
      const rest = stored.subarray(prefix.length);
      if (globs.some((g) => globMatch(g, rest))) return rest;
    }
    return null;
  }

  /** What a client sees of a stored name: its own name, or null for a key no client name reaches. */
  visibleName(stored: Buffer): Buffer | null {
    const name = this.ruleName(stored);
    if (name !== null) return name;
    return this.storedName(stored) === null ? stored : null;
  }
}

/** Whether the name in buf[start, end) matches `rule`: a `literal*` rule by its literal start, in place; any other on the name itself. */
function ruleMatches(rule: CompiledRule, buf: Buffer, start: number, end: number): boolean {
  const literal = rule.literalStart;
  if (literal === null) return globMatch(rule.glob, start === 0 && end === buf.length ? buf : buf.subarray(start, end));
  const n = literal.length;
  if (end - start < n) return false;
  for (let i = 0; i < n; i++) if (buf[start + i] !== literal[i]) return false;
  return true;
}

/** `glob` without its one trailing `*` when the rest holds no glob syntax (`rq:*` → `rq:`, `*` → empty), else null. */
function literalStartOf(glob: Buffer): Buffer | null {
  const last = glob.length - 1;
  if (last < 0 || glob[last] !== 0x2a) return null;
  for (let i = 0; i < last; i++) {
    const c = glob[i];
    if (c === 0x2a || c === 0x3f || c === 0x5b || c === 0x5c) return null; // * ? [ \
  }
  return glob.subarray(0, last);
}

/**
 * What is wrong with a list of rules (null: nothing): a tag that is empty or holds a brace (it
 * would not be the stored name's hash tag), respool's own fleet tag, or two rules with different
 * tags that could match one same key.
 */
export function colocationProblem(rules: readonly ColocationRule[]): string | null {
  for (const [i, rule] of rules.entries()) {
    if (rule.keys.length === 0) return `colocate[${i}].keys must be a non-empty glob`;
    if (rule.tag.length === 0 || /[{}]/.test(rule.tag)) return `colocate[${i}].tag must be a non-empty name without { or }`;
    if (`{${rule.tag}}` === FLEET_TAG) return `colocate[${i}].tag ${JSON.stringify(rule.tag)} is respool's own (the fleet's shared state)`;
    for (let j = 0; j < i; j++) {
      const other = rules[j]!;
      if (other.tag !== rule.tag && globsOverlap(Buffer.from(other.keys, 'utf8'), Buffer.from(rule.keys, 'utf8'))) {
        return `colocate[${j}] (${JSON.stringify(other.keys)} → {${other.tag}}) and colocate[${i}] (${JSON.stringify(rule.keys)} → {${rule.tag}}) can match the same key with different tags`;
      }
    }
  }
  return null;
}
