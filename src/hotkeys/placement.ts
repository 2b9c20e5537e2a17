import calculateSlot from 'cluster-key-slot';

/**
 * Where the copies of a split key live.
 *
 * The original key is always copy 0: it is written on every write like the others, so it is the
 * source of truth for repairs and for reads that find a copy missing, and removing a split key
 * only has to delete the extra copies. The other N-1 copies get generated names whose slots are
 * chosen so that the N copies spread over the primaries as evenly as possible: with P primaries
 * each holds floor(N/P) or ceil(N/P) copies, never more (unless slots are not served).
 *
 * Copy names: the original name plus a hash tag, `<key>{rpcopy:<slot>.<i>}`, so the tag (and not
 * the original's own content) decides the copy's slot. A key that already has a hash tag of its
 * own ("user:{42}") gets the tag in front instead: `{rpcopy:<slot>.<i>}<key>`. <slot> is the
 * original's slot, so different split keys use different copy slots; <i> is searched upwards
 * from 0 until every primary has its share.
 */
export interface CopyPlace {
  /** The copy's key name (the original for copy 0). */
  name: Buffer;
  slot: number;
  /** Address of the primary that owned `slot` when the placement was made ('' when unserved). */
  node: string;
}

/** Candidates tried before giving up on a primary that owns too few slots to be found. */
const MAX_CANDIDATES = 20_000;

/** True when `key` has a non-empty {hash tag} that decides its slot. */
export function hasHashTag(key: Buffer): boolean {
  const open = key.indexOf(0x7b);
  if (open < 0) return false;
  const close = key.indexOf(0x7d, open + 1);
  return close > open + 1;
}

export function copyName(key: Buffer, keySlot: number, i: number): Buffer {
  const tag = Buffer.from(`{rpcopy:${keySlot}.${i}}`, 'latin1');
  return hasHashTag(key) ? Buffer.concat([tag, key]) : Buffer.concat([key, tag]);
}

/**
 * How many copies each primary should hold: floor(N/P) each, and the N mod P extra copies on
 * the original's primary first (it holds the original anyway), then on the next primaries in
 * an order rotated by the key's slot, so many split keys do not all load the same primaries.
 */
export function copyTargets(copies: number, primaries: readonly string[], originalNode: string, keySlot: number): Map<string, number> {
  const targets = new Map<string, number>();
  const p = primaries.length;
  if (p === 0) return targets;
  const base = Math.floor(copies / p);
  let extra = copies % p;
  for (const node of primaries) targets.set(node, base);
  const order: string[] = [];
  if (targets.has(originalNode)) order.push(originalNode);
  const others = primaries.filter((n) => n !== originalNode);
  for (let k = 0; k < others.length; k++) order.push(others[(k + keySlot) % others.length]!);
  for (const node of order) {
    if (extra === 0) break;
    targets.set(node, targets.get(node)! + 1);
    extra--;
  }
  // The original's primary holds at least the original itself.
  if (targets.has(originalNode) && targets.get(originalNode)! === 0) {
    // Only when copies < primaries and there were no extras left for it (cannot happen with the
    // order above, since the original's node is first), kept for safety.
    targets.set(originalNode, 1);
  }
  return targets;
}

/**
 * Chooses names for `copies` copies of `key` (copy 0 = the original). `ownerOf(slot)` gives the
 * primary address that serves a slot ('' or undefined when none); `primaries` lists every primary.
 * Copy names from `previous` that still sit on a primary with room are kept, so a topology
 * change moves as few copies as possible.
 */
export function placeCopies(
  key: Buffer,
  copies: number,
  primaries: readonly string[],
  ownerOf: (slot: number) => string | undefined,
  previous: readonly Buffer[] = [],
): CopyPlace[] {
  const keySlot = calculateSlot(key);
  const originalNode = ownerOf(keySlot) ?? '';
  const placed: CopyPlace[] = [{ name: key, slot: keySlot, node: originalNode }];
  if (copies <= 1 || primaries.length === 0) return placed;
  const need = copyTargets(copies, primaries, originalNode, keySlot);
  if (need.has(originalNode)) need.set(originalNode, need.get(originalNode)! - 1);
  let remaining = copies - 1;
  const used = new Set<string>([key.toString('latin1')]);
  const take = (name: Buffer, slot: number, node: string): void => {
    placed.push({ name, slot, node });
    used.add(name.toString('latin1'));
    need.set(node, need.get(node)! - 1);
    remaining--;
  };
  for (const name of previous) {
    if (remaining === 0) break;
    const id = name.toString('latin1');
    if (used.has(id)) continue;
    const slot = calculateSlot(name);
    const node = ownerOf(slot);
    if (node !== undefined && (need.get(node) ?? 0) > 0) take(name, slot, node);
  }
  for (let i = 0; remaining > 0 && i < MAX_CANDIDATES; i++) {
    const name = copyName(key, keySlot, i);
    if (used.has(name.toString('latin1'))) continue;
    const slot = calculateSlot(name);
    const node = ownerOf(slot);
    if (node !== undefined && (need.get(node) ?? 0) > 0) take(name, slot, node);
  }
  return placed;
}

/**
 * Copy names for a fleet (cluster.fleetState): every member must name a split key's copies the
 * same, whatever topology it holds at the moment, so the names depend on the key and the count
 * only. The slot space is cut into `copies` equal bands; the original sits in one, and one copy
 * goes to the middle half of each other band (the first `<i>` whose slot lands there). On the
 * usual layout — each primary owning one contiguous, equal share of the slots, as
 * `valkey-cli --cluster create` makes it — N copies on P primaries (N a multiple of P) land N/P
 * per primary, as placeCopies would place them; after a resharding that leaves the layout
 * uneven they may not, and are not moved (re-adding the split names them again). Copy 0 is the
 * original.
 */
export function bandCopies(key: Buffer, copies: number): Buffer[] {
  const names: Buffer[] = [key];
  if (copies <= 1) return names;
  const keySlot = calculateSlot(key);
  const width = 16384 / copies;
  const own = Math.min(copies - 1, Math.floor(keySlot / width));
  let i = 0;
  for (let band = 0; band < copies; band++) {
    if (band === own) continue;
    const low = band * width + width / 4;
    const high = (band + 1) * width - width / 4;
    for (let tries = 0; tries < MAX_CANDIDATES; tries++, i++) {
      const name = copyName(key, keySlot, i);
      const slot = calculateSlot(name);
      if (slot >= low && slot < high) {
        names.push(name);
        i++;
        break;
      }
    }
  }
  return names;
}
