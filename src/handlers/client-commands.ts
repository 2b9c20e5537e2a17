import type { CommandSpec } from '../commands/command-table.js';
import { JOIN_BUFFER_BYTES } from '../util/batched-writer.js';
import { wrongArity } from '../commands/command-table.js';
import { encodeError, encodeInteger, encodeSimple, encodeVerbatim } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import type { ClientState } from '../client/client-state.js';
import type { Handler, HandlerSession } from '../client/handler-session.js';
import { clientAddr, clientLaddr, type ListedClient } from '../client/client-address.js';

/**
 * CLIENT LIST, CLIENT KILL, CLIENT PAUSE, CLIENT UNPAUSE about respool's own clients (its
 * upstream links are no client's business), in Valkey 8.0.1's formats and with its replies
 * (networking.c clientCommand). CLIENT INFO (local.ts) prints the same line (clientInfoLine).
 *
 *   LIST   : one line per respool client, Valkey's fields in Valkey's order, measured on respool's
 *            own buffers (clientInfoLine); fields respool has no counterpart for are left out
 *   KILL   : old form `addr` (+OK / ERR No such client) and the filter form (:count); a killed
 *            client's socket is destroyed, its close path releases leases and subscriptions;
 *            the caller itself (SKIPME no, or the old form) is closed after this reply
 *   PAUSE  : respool's own clients (client/client-pause.ts: ClientSession holds a request that
 *            the pause covers, and stops reading, until the pause ends); Valkey's rules: ALL
 *            holds every command (CLIENT UNPAUSE too), WRITE those that may write or replicate
 */
export const clientCommands: Handler = (session, req) => {
  const { reply, closeSelf } = run(session, req.spec, req.command, req.args);
  session.replyNow(reply);
  if (closeSelf) session.closeAfterReplies();
};

/** Inside MULTI: answered at EXEC (transaction.ts via local.ts localReply). */
export function clientCommandReply(session: HandlerSession, command: string, args: Buffer[]): Buffer {
  const { reply, closeSelf } = run(session, session.ctx.commands().get(command), command, args);
  if (closeSelf) queueMicrotask(() => session.closeAfterReplies()); // once EXEC's reply is queued
  return reply;
}

interface Outcome {
  reply: Buffer;
  closeSelf: boolean;
}

const OK = encodeSimple('OK');

function run(session: HandlerSession, spec: CommandSpec | undefined, command: string, args: Buffer[]): Outcome {
  const done = (reply: Buffer, closeSelf = false): Outcome => ({ reply, closeSelf });
  switch (command) {
    case 'client|list':
      return done(clientList(session, args));
    case 'client|kill':
      return clientKill(session, args);
    case 'client|pause':
      return done(clientPause(session, args));
    case 'client|unpause':
      session.ctx.clientPause.unpause();
      return done(OK);
    default:
      return done(encodeError(ProxyError.notLocal(command)));
  }
}

const lower = (b: Buffer) => b.toString('latin1').toLowerCase();

function isPubsub(state: ClientState): boolean {
  return state.subscriptions !== null && state.subscriptions.total() > 0;
}

function ageSeconds(c: ListedClient, nowMs: number): number {
  return Math.floor(nowMs / 1000) - Math.floor(c.createdAt / 1000);
}

/**
 * Valkey 8.0.1 catClientInfoString, field for field (without the trailing newline), each one
 * measured on what respool holds for the client (ClientBuffers): qbuf the bytes read and not yet
 * handled, argv-mem the arguments of the request being handled (or held by CLIENT PAUSE, or
 * blocked), multi-mem the commands queued in MULTI, obl the reply batch not yet handed to the
 * socket, oll / omem the replies waiting behind an unanswered one plus what the kernel has not
 * taken, tot-mem their sum, events r while respool reads the socket and w while output waits.
 * qbuf-free is 0, what Valkey shows for a client without a query buffer of its own (it reads
 * into the shared one; respool's reads go to shared slabs); clients parse it (redis-py 4.3's
 * client_info() fails on a line without it). rbs / rbp, Valkey's reply buffer and its peak of the
 * last 5 s: respool joins a client's small replies into one buffer per write (replies above
 * JOIN_BUFFER_BYTES go as they are), so rbp is the largest such write of about the last 5 s and
 * rbs that buffer's size, JOIN_BUFFER_BYTES or rbp if larger. Like every other figure here,
 * tot-mem counts what respool holds, so not rbs.
 */
export function clientInfoLine(c: ListedClient): string {
  const state = c.state;
  const subs = state.subscriptions;
  const tx = state.transaction;
  const inMulti = tx !== null || state.lane?.inMulti === true;
  let flags = '';
  if (state.monitoring) flags += 'O';
  if (isPubsub(state)) flags += 'P';
  if (inMulti) flags += 'x';
  if (state.blocked || state.pausedHeld) flags += 'b';
  if (state.tracking !== null) {
    flags += 't';
    if (state.tracking.options.bcast) flags += 'B';
  }
  if (flags === '') flags = 'N';
  const socket = c.socket;
  const fd = (socket as unknown as { _handle?: { fd?: number } } | undefined)?._handle?.fd;
  const io = c.buffers();
  const multiMem = tx !== null ? tx.bytes : 0;
  const omem = io.heldReplyBytes + io.unsentBytes;
  const events = `${io.reading ? 'r' : ''}${io.unsentBytes + io.batchedBytes > 0 ? 'w' : ''}`;
  return (
    `id=${c.id} addr=${clientAddr(c)} laddr=${clientLaddr(c)} fd=${typeof fd === 'number' ? fd : -1} ` +
    `name=${state.name ?? ''} age=${ageSeconds(c, Date.now())} ` +
    `idle=${Math.max(0, Math.floor((performance.now() - state.lastInteraction) / 1000))} flags=${flags} db=${state.db} ` +
    `sub=${subs?.channels.size ?? 0} psub=${subs?.patterns.size ?? 0} ssub=${subs?.shardChannels.size ?? 0} ` +
    `multi=${tx !== null ? tx.queued.length : inMulti ? 0 : -1} watch=${state.lane?.watched.size ?? 0} ` +
    `qbuf=${io.queryBytes} qbuf-free=0 argv-mem=${io.argvBytes} multi-mem=${multiMem} ` +
    `rbs=${Math.max(JOIN_BUFFER_BYTES, io.peakBatchBytes)} rbp=${io.peakBatchBytes} obl=${io.batchedBytes} oll=${io.heldReplies} ` +
    `omem=${omem} tot-mem=${io.queryBytes + io.argvBytes + multiMem + io.batchedBytes + omem} events=${events} ` +
    `cmd=${state.lastCommand} user=${state.user ?? 'default'} redir=${state.tracking !== null ? 0 : -1} ` +
    `resp=${state.protocol} lib-name=${state.libName} lib-ver=${state.libVersion} ` +
    `tot-net-in=${io.bytesIn} tot-net-out=${io.bytesOut} tot-cmds=${state.commandCount}`
  );
}

type ClientType = 'normal' | 'replica' | 'pubsub' | 'primary';

/** Valkey's getClientTypeByName. */
function typeByName(name: string): ClientType | null {
  switch (name.toLowerCase()) {
    case 'normal':
      return 'normal';
    case 'slave':
    case 'replica':
      return 'replica';
    case 'pubsub':
      return 'pubsub';
    case 'master':
    case 'primary':
      return 'primary';
    default:
      return null;
  }
}

/** respool's clients are never replicas nor primaries (MONITOR clients count as normal, as in Valkey). */
function typeOf(c: ListedClient): ClientType {
  return isPubsub(c.state) ? 'pubsub' : 'normal';
}

function sessions(session: HandlerSession): ListedClient[] {
  return [...(session.ctx.sessions() as Iterable<ListedClient>)].filter((s) => !s.closed);
}

/** Valkey's string2ll: a canonical signed 64-bit decimal. */
function parseLongLong(text: string): bigint | null {
  if (!/^(?:0|-?[1-9][0-9]{0,18})$/.test(text)) return null;
  const v = BigInt(text);
  return v > 9223372036854775807n || v < -9223372036854775808n ? null : v;
}

/** CLIENT LIST [TYPE type] | [ID id …] */
function clientList(session: HandlerSession, args: Buffer[]): Buffer {
  let type: ClientType | null = null;
  let lines: string[];
  if (args.length === 4 && lower(args[2]!) === 'type') {
    type = typeByName(args[3]!.toString('utf8'));
    if (type === null) return encodeError(ProxyError.unknownClientType(args[3]!.toString('utf8')));
    lines = sessions(session).filter((c) => typeOf(c) === type).map(clientInfoLine);
  } else if (args.length > 3 && lower(args[2]!) === 'id') {
    const all = sessions(session);
    lines = [];
    for (let j = 3; j < args.length; j++) {
      const id = parseLongLong(args[j]!.toString('latin1'));
      if (id === null) return encodeError(ProxyError.invalidClientId());
      const found = all.find((c) => BigInt(c.id) === id);
      if (found !== undefined) lines.push(clientInfoLine(found));
    }
  } else if (args.length !== 2) {
    return encodeError(ProxyError.syntax());
  } else {
    lines = sessions(session).map(clientInfoLine);
  }
  return encodeVerbatim(lines.map((l) => `${l}\n`).join(''), session.state.protocol);
}

/** CLIENT KILL addr | CLIENT KILL <filter> <value> … (Valkey 8.0.1: the last of a repeated filter wins). */
function clientKill(session: HandlerSession, args: Buffer[]): Outcome {
  const fail = (message: string): Outcome => ({ reply: encodeError(message), closeSelf: false });
  let addr: string | null = null;
  let laddr: string | null = null;
  let user: string | null = null;
  let type: ClientType | null = null;
  let id = 0n;
  let maxAge = 0n;
  let skipme = true;
  const oldForm = args.length === 3;
  if (oldForm) {
    addr = args[2]!.toString('utf8');
    skipme = false; // with the old form a client can kill itself
  } else {
    for (let i = 2; i < args.length; i += 2) {
      const option = lower(args[i]!);
      const value = args[i + 1]?.toString('utf8');
      if (value === undefined) return fail(ProxyError.syntax());
      if (option === 'id') {
        const v = parseLongLong(value);
        if (v === null || v < 1n) return fail(ProxyError.clientIdNotPositive());
        id = v;
      } else if (option === 'maxage') {
        const v = parseLongLong(value);
        if (v === null) return fail(ProxyError.maxAgeNotInteger());
        if (v <= 0n) return fail(ProxyError.maxAgeNotPositive());
        maxAge = v;
      } else if (option === 'type') {
        type = typeByName(value);
        if (type === null) return fail(ProxyError.unknownClientType(value));
      } else if (option === 'addr') {
        addr = value;
      } else if (option === 'laddr') {
        laddr = value;
      } else if (option === 'user') {
        if (!knownUser(session, value)) return fail(ProxyError.noSuchUser(value));
        user = value;
      } else if (option === 'skipme') {
        const v = value.toLowerCase();
        if (v !== 'yes' && v !== 'no') return fail(ProxyError.syntax());
        skipme = v === 'yes';
      } else {
        return fail(ProxyError.syntax());
      }
    }
  }
  const now = Date.now();
  let killed = 0;
  let closeSelf = false;
  for (const c of sessions(session)) {
    if (addr !== null && clientAddr(c) !== addr) continue;
    if (laddr !== null && clientLaddr(c) !== laddr) continue;
    if (type !== null && typeOf(c) !== type) continue;
    if (id !== 0n && BigInt(c.id) !== id) continue;
    if (user !== null && (c.state.user ?? 'default') !== user) continue;
    if (c.id === session.id && skipme) continue;
    if (maxAge !== 0n && BigInt(ageSeconds(c, now)) < maxAge) continue;
    if (c.id === session.id) closeSelf = true;
    else (c as unknown as { destroy(): void }).destroy();
    killed++;
  }
  if (oldForm) return { reply: killed === 0 ? encodeError(ProxyError.noSuchClient()) : OK, closeSelf };
  return { reply: encodeInteger(killed), closeSelf };
}

/** The users respool knows: its configured ones, and `default` (every client's before AUTH). */
function knownUser(session: HandlerSession, name: string): boolean {
  return name === 'default' || session.ctx.config.users.some((u) => u.name === name);
}

/** CLIENT PAUSE timeout [WRITE|ALL] */
function clientPause(session: HandlerSession, args: Buffer[]): Buffer {
  if (args.length > 4) return encodeError(ProxyError.clientSubcommandSyntax(args[1]!.toString('utf8')));
  let all = true;
  if (args.length === 4) {
    const mode = lower(args[3]!);
    if (mode === 'write') all = false;
    else if (mode !== 'all') return encodeError(ProxyError.pauseMode());
  }
  const ms = parseLongLong(args[2]!.toString('latin1'));
  if (ms === null) return encodeError(ProxyError.timeoutNotInteger());
  if (ms < 0n) return encodeError(ProxyError.timeoutNegative());
  if (ms > BigInt(Number.MAX_SAFE_INTEGER) - BigInt(Date.now())) return encodeError(ProxyError.timeoutOutOfRange());
  session.ctx.clientPause.pause(Number(ms), all);
  if (!all) void session.ctx.functions?.refresh(); // which FCALLs a WRITE pause lets through (client-pause.ts)
  return OK;
}
