import type { RespoolConfig } from '../config/types.js';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { LeasePools } from '../upstream/lease-pools.js';
import type { SideAddress, SidePlace } from './migration-side.js';
import { formatHostPort } from '../config/values.js';
import type { Logger } from 'pino';
import type { SignIns } from './sign-ins.js';
import type { CutoverRecord } from './cutover-record.js';

/** What a process switches when its main upstreams move (a cutover, a rollback): the same in every worker. */
export interface UpstreamSwitchDeps {
  config: RespoolConfig;
  refresher: TopologyRefresher;
  dedicated: LeasePools;
  /** This process's credentials for each side (the places it is told carry none). */
  signIns: SignIns;
  /** Where the upstreams moved, on disk for a restart (null: not kept, a test's process). */
  record: CutoverRecord | null;
  /** Told after the switch (the near cache drops what the old side's tracking said). */
  onCutover?: () => void;
}

/** A switch that did not happen: the upstreams are as they were. */
export class SwitchFailed extends Error {}

/**
 * Points the process's main upstreams at `to`: config, topology (discovered before anything else
 * changes — a side that does not answer leaves everything as it was), leased connections
 * elsewhere closed (a WATCH or blocked client gets an error rather than writing to the old side),
 * near cache flushed. The caller holds writes meanwhile.
 */
export async function switchUpstreams(deps: UpstreamSwitchDeps, place: SidePlace): Promise<void> {
  const { config, refresher, dedicated, signIns } = deps;
  const to = signIns.at(place);
  const before = { upstreams: config.upstreams, mode: config.mode, upstreamAuth: config.upstreamAuth, upstreamTls: config.upstreamTls };
  const signedInBefore = signIns.current;
  try {
    pointConfigAt(config, signIns, to);
    const topology = await refresher.reseed(to.seeds, to.mode);
    if (topology === null) throw new SwitchFailed(`${to.seeds.map(formatHostPort).join(', ')} did not answer its discovery; nothing switched`);
    dedicated.closeOutside(new Set(topology.allNodes().map((n) => n.address)), 'the upstreams moved (a migration switched them): run it again');
    deps.record?.moved(place);
    deps.onCutover?.();
  } catch (err) {
    Object.assign(config, before);
    signIns.current = signedInBefore;
    throw err instanceof SwitchFailed ? err : new SwitchFailed((err as Error).message);
  }
}

/**
 * At start, before anything connects: when an earlier run's cutover moved the configured upstreams
 * (cutover-record.ts), the process starts on the side they moved to — its topology is discovered
 * there (clients get CLUSTERDOWN until it answers), never on the side the cutover left behind.
 */
export function followRecordedMove(deps: { config: RespoolConfig; signIns: SignIns; record: CutoverRecord; log: Logger }): void {
  const moved = deps.record.read();
  if (moved === null) return;
  const configured = deps.config.upstreams.map(formatHostPort).join(', ');
  const to = deps.signIns.at(moved.to);
  pointConfigAt(deps.config, deps.signIns, to);
  const now = to.seeds.map(formatHostPort).join(', ');
  deps.log.warn({ event: 'migration_upstreams_moved', configured, upstreams: to.seeds, movedAt: new Date(moved.at).toISOString(), file: deps.record.path },
    `the configured upstreams (${configured}) were moved to ${now} by a migration's cutover at ${new Date(moved.at).toISOString()} (${deps.record.path}): serving from ${now}; put them in the config's upstreams`);
}

/** The running config's main upstreams (and whose credentials they take) become `to`'s. */
function pointConfigAt(config: RespoolConfig, signIns: SignIns, to: SideAddress): void {
  Object.assign(config, { upstreams: to.seeds, mode: to.mode, upstreamAuth: to.upstreamAuth, upstreamTls: to.upstreamTls });
  signIns.current = to.signIn;
}

/** Where the main upstreams are now (what a switch back restores). */
export function currentUpstreams(deps: Pick<UpstreamSwitchDeps, 'config' | 'signIns'>): SidePlace {
  return { seeds: deps.config.upstreams.map((u) => ({ host: u.host, port: u.port })), mode: deps.config.mode, signIn: deps.signIns.current };
}

/**
 * Waits until `busy()` is false, yielding to the event loop (the writes in flight need it to be
 * answered); false if `deadline` (epoch ms) passed first. `step` runs each round (copies left to do).
 */
export async function drainUntil(busy: () => boolean, deadline: number, step: () => Promise<void> = async () => undefined): Promise<boolean> {
  while (busy()) {
    if (Date.now() > deadline) return false;
    await step();
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return true;
}
