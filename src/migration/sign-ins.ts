import type { RespoolConfig } from '../config/types.js';
import type { SideAddress, SidePlace, SignIn } from './migration-side.js';

type Credentials = Pick<SideAddress, 'upstreamAuth' | 'upstreamTls'>;

/**
 * How this process signs in at a side of a migration. Processes tell each other where a side is
 * (a SidePlace: its seeds, its mode, and which of their credentials sign in there) and never the
 * credentials themselves: a fleet's messages are stored in its shared state, on the upstreams,
 * where any client of the nodes could read them. Each process signs in with its own config's:
 *
 *   upstreams  upstreamAuth and upstreamTls as this process started with them (a cutover
 *              replaces those in the running config; a switch back needs the old ones)
 *   migration  the migration block's (migration.upstreamAuth, migration.upstreamTls), each
 *              falling back to the upstreams'
 */
export class SignIns {
  private readonly upstreams: Credentials;
  /** Whose credentials the main upstreams take now: the upstreams' until a cutover points them at a target. */
  current: SignIn = 'upstreams';

  constructor(private readonly config: RespoolConfig) {
    this.upstreams = { upstreamAuth: config.upstreamAuth, upstreamTls: config.upstreamTls };
  }

  /** The place, with this process's credentials for it. */
  at(place: SidePlace): SideAddress {
    const own = this.config.migration;
    const credentials: Credentials = place.signIn === 'upstreams'
      ? this.upstreams
      : { upstreamAuth: own.upstreamAuth === undefined ? this.upstreams.upstreamAuth : own.upstreamAuth, upstreamTls: own.upstreamTls ?? this.upstreams.upstreamTls };
    return { ...placeOf(place), ...credentials };
  }
}

/** What may be told to another process (or stored in the fleet's state): the address without its credentials. */
export function placeOf(address: SidePlace): SidePlace {
  return { seeds: address.seeds.map((s) => ({ host: s.host, port: s.port })), mode: address.mode, signIn: address.signIn };
}
