import type { Socket } from 'node:net';
import type { ClientState } from '../client/client-state.js';
import type { UserDirectory } from '../acl/user-directory.js';
import { stopKernelReads } from '../util/kernel-reads.js';
import type { TLSSocket } from 'node:tls';
import { releaseSessionSocket } from './session-socket.js';
import type { TlsRelays } from './tls-relay.js';

/** What a client connection carries to the process it is handed to: the state a plain session has. */
export interface ClientSnapshot {
  protocol: 2 | 3;
  db: number;
  name: string | null;
  libName: string;
  libVersion: string;
  /** The user it authenticated as; null: still the default user. */
  user: string | null;
  /** Bytes read from the socket and not handled yet (base64): handled first by the new process. */
  unread: string;
}

/** Sends a client's socket and its snapshot to the process that takes it over (main.ts: IPC to the supervisor). */
export type HandOver = (socket: Socket, snapshot: ClientSnapshot) => void;

/** What the handover reads of a session (client-session.ts). */
export interface HandedSession {
  readonly closed: boolean;
  readonly socket: Socket;
  readonly state: ClientState;
  readonly pending: number;
  queryBytes(): number;
  unreadOutputBytes(): number;
  holdReading(): void;
  socketClosed(): void;
  /** Closes it once its replies are written (left to the drain). */
  drain(): void;
  /**
   * Set by the handover while the session waits to become plain: called with each chunk read
   * before it is handled; true: the chunk was put back unread and reading held (it goes along).
   */
  takeIdle: ((chunk: Buffer) => boolean) | null;
}

/** How often waiting sessions are looked at: a request's round trip is about this. */
const POLL_MS = 2;

/**
 * A takeover's old process hands its plain client connections to the new one instead of closing
 * them (src/workers/takeover.ts): the client keeps its TCP or Unix connection and never sees the
 * change. A session is plain when nothing about it lives only here: no transaction, WATCH lane,
 * lease or blocked call (passing: it waits for them to end), subscription, tracking, MONITOR or
 * replication stream, no CLIENT REPLY OFF|SKIP, no tenant (lasting: the drain closes it after its
 * replies; the client reconnects). A TLS connection's
 * session keys cannot leave this process: it stays here, relayed in plaintext to the new process
 * over a loopback connection whose far end is what goes (tls-relay.ts).
 *
 *   hold    : each plain session stops reading its socket at once; what its client sends from
 *             now on stays in the kernel and is read by the new process. A session in a passing
 *             state is served on until it is idle (plain, owing nothing): the chunk that would
 *             start its next request is put back unread (takeIdle) — a BLPOP worker's next
 *             BLPOP, the command after EXEC — and it is held then
 *   wait    : it goes once it owes nothing — every reply written and taken by the kernel, no
 *             request bytes read and not handled — looked at every POLL_MS
 *   go      : the socket (its file descriptor, over IPC) — for TLS, the relay's far end — and
 *             the snapshot leave; the session is closed here without closing the socket
 *   give up : a session held that stops being plain (a request it had read), one that takes a
 *             lasting state, or one still waiting at `deadline`, is left to the drain (`leave`)
 */
export async function handOverSessions(sessions: Iterable<HandedSession>, handOver: HandOver, deadline: number, relays: TlsRelays, leave: (session: HandedSession) => void): Promise<number> {
  const waiting = new Set<HandedSession>();
  const held = new Set<HandedSession>();
  const hold = (session: HandedSession) => {
    session.takeIdle = null;
    session.holdReading();
    stopKernelReads(session.socket);
    held.add(session);
  };
  for (const session of sessions) {
    if (lasting(session)) {
      leave(session);
      continue;
    }
    waiting.add(session);
    if (plain(session)) hold(session);
    else {
      session.takeIdle = (chunk) => {
        if (!idle(session)) return false;
        hold(session); // paused first: a flowing stream would hand the chunk put back straight to 'data'
        session.socket.unshift(Buffer.from(chunk)); // copied: a shared read buffer is reused
        return true;
      };
    }
  }
  const giveUp = (session: HandedSession) => {
    session.takeIdle = null;
    waiting.delete(session);
    if (!session.closed) leave(session);
  };
  let handed = 0;
  while (waiting.size > 0 && Date.now() < deadline) {
    for (const session of waiting) {
      if (session.closed || lasting(session) || (held.has(session) && !plain(session))) {
        giveUp(session);
        continue;
      }
      if (!held.has(session)) {
        if (!idle(session)) continue; // its transaction, blocked call … still runs
        hold(session);
      }
      if (session.pending > 0 || session.queryBytes() > 0 || session.unreadOutputBytes() > 0 || session.socket.writableLength > 0) continue;
      // What the socket read into its stream buffer before it stopped (a socket adopted from an
      // earlier takeover reads through Node's stream, not the shared buffer) goes along.
      const unread = session.socket.readableLength > 0 ? (session.socket.read() as Buffer | null) : null;
      waiting.delete(session);
      let socket = session.socket;
      if ('encrypted' in socket) {
        try {
          socket = await relays.relay(socket as TLSSocket, releaseSessionSocket);
        } catch {
          leave(session); // no loopback connection to be had
          continue;
        }
      }
      handOver(socket, snapshot(session.state, unread));
      session.socketClosed();
      handed++;
    }
    if (waiting.size > 0) await new Promise((r) => setTimeout(r, POLL_MS));
  }
  for (const session of waiting) giveUp(session);
  return handed;
}

/** State that lives only here for as long as the client keeps it: the drain's. */
function lasting(session: HandedSession): boolean {
  const s = session.state;
  return (s.subscriptions !== null && s.subscriptions.total() > 0) || s.tracking !== null || s.monitoring || s.replicaStream
    || s.repliesSuppressed || s.tenant !== null || session.socket.destroyed;
}

/** Nothing about it lives only here. */
function plain(session: HandedSession): boolean {
  const s = session.state;
  return s.transaction === null && s.lane === null && s.lease === null && !s.blocked && !lasting(session);
}

/** Plain, and between requests: nothing owed, nothing read and not handled. */
function idle(session: HandedSession): boolean {
  return plain(session) && session.pending === 0 && session.queryBytes() === 0;
}

function snapshot(s: ClientState, unread: Buffer | null): ClientSnapshot {
  return { protocol: s.protocol, db: s.db, name: s.name, libName: s.libName, libVersion: s.libVersion, user: s.user, unread: unread?.toString('base64') ?? '' };
}

/**
 * In the new process: a handed-over client's state put back. False when its user is not known
 * here (the socket is then closed: the client reconnects and authenticates again).
 */
export function restoreSnapshot(state: ClientState, snap: ClientSnapshot, users: UserDirectory): boolean {
  if (snap.user !== null) {
    const acl = users.get(snap.user);
    if (acl === undefined) return false;
    state.authenticate(snap.user, acl);
  }
  state.setProtocol(snap.protocol);
  state.select(snap.db);
  if (snap.name !== null) state.setName(snap.name);
  state.setLib('lib-name', snap.libName);
  state.setLib('lib-ver', snap.libVersion);
  return true;
}
