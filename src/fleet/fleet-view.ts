import type { ClusterEmulation } from './cluster-emulation.js';
import { encodeArray, encodeBulk, encodeInteger } from '../resp/encode.js';
import type { FleetState } from './fleet-state.js';
import type { Membership } from './membership.js';
import { formatRuns, slotCount } from './slot-division.js';

/** One member as RESPOOL FLEET and GET /fleet show it. */
export interface FleetMemberView {
  address: string;
  id: string;
  self: boolean;
  /** alive, suspect, joining or fail (fleet/membership.ts). */
  state: string;
  /** Since its last answer to a check (0 for this instance); null before any. */
  lastSeenMsAgo: number | null;
  /** Since it entered its state. */
  stateForMs: number;
  /** Slots this instance shows it owning, and their runs ("0-63 192-255"). */
  slots: number;
  slotRanges: string;
  /** The version of the fleet's shared state it reported applied (null: no registration seen, or no shared state). */
  version: number | null;
  lastError: string;
}

export interface FleetView {
  self: string;
  /** The shared state as this instance holds it (null: cluster.fleetState off, or no fleet). */
  state: { version: number; confirmedAgeMs: number | null; rules: number; registrations: number } | null;
  members: FleetMemberView[];
}

/** The fleet as this instance sees it now. */
export function fleetView(membership: Membership | null, emulation: ClusterEmulation, state: FleetState | null, now = Date.now()): FleetView {
  const applied = new Map<string, number>();
  for (const r of state?.members(now) ?? []) applied.set(r.address, Math.min(applied.get(r.address) ?? Infinity, r.applied));
  const byAddress = new Map(emulation.nodes.map((n) => [n.address, n]));
  const members = (membership?.members() ?? []).map((m) => {
    const node = byAddress.get(m.address);
    return {
      address: m.address, id: m.id, self: m.self, state: m.state,
      lastSeenMsAgo: m.self ? 0 : m.lastSeenAt === null ? null : now - m.lastSeenAt,
      stateForMs: now - m.stateSince,
      slots: slotCount(node?.slots ?? []),
      slotRanges: formatRuns(node?.slots ?? []),
      version: m.self && state !== null ? state.version : (applied.get(m.address) ?? null),
      lastError: m.lastError,
    };
  });
  if (membership === null) {
    const self = emulation.self;
    members.push({
      address: self.address, id: self.id, self: true, state: 'alive', lastSeenMsAgo: 0, stateForMs: 0,
      slots: slotCount(self.slots), slotRanges: formatRuns(self.slots), version: state?.version ?? null, lastError: '',
    });
  }
  const age = state?.confirmedAgeMs(now) ?? null;
  return {
    self: emulation.self.address,
    state: state === null ? null : {
      version: state.version, confirmedAgeMs: age === null || age === Infinity ? null : age,
      rules: state.doc.rules.length, registrations: state.members(now).length,
    },
    members,
  };
}

/** RESPOOL FLEET: one flat field/value array per member. */
export function fleetReply(view: FleetView, proto: 2 | 3): Buffer {
  const bulk = (v: string) => encodeBulk(v, proto);
  return encodeArray(view.members.map((m) => encodeArray([
    bulk('member'), bulk(m.address),
    bulk('id'), bulk(m.id),
    bulk('state'), bulk(m.self ? `${m.state},myself` : m.state),
    bulk('last_seen_ms'), m.lastSeenMsAgo === null ? encodeInteger(-1) : encodeInteger(m.lastSeenMsAgo),
    bulk('slots'), encodeInteger(m.slots),
    bulk('slot_ranges'), bulk(m.slotRanges),
    bulk('version'), encodeInteger(m.version ?? -1),
    ...(m.lastError !== '' && m.state !== 'alive' ? [bulk('error'), bulk(m.lastError)] : []),
  ])));
}
