import { encodeArray, encodeBulk, encodeError, encodeInteger, encodeMap, encodeSimple, encodeVerbatim } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import type { ServerContext } from '../client/server-context.js';
import type { CommandRequest, Handler, HandlerSession } from '../client/handler-session.js';
import { infoClients } from './info.js';
import { resetSubscriptions } from './pubsub.js';
import { subscribedPong } from '../pubsub/replies.js';
import { clusterReply, LOCAL_CLUSTER_COMMANDS } from './cluster.js';
import { oneShotTo } from './script.js';
import { CLIENT_COMMANDS } from '../commands/proxy-handling.js';
import { clientCommandReply, clientInfoLine } from './client-commands.js';
import { checkCredentials } from '../acl/rules.js';
import { aclReply } from './acl.js';
import { OBSERVE_COMMANDS, observeReply } from './observe.js';

const OK = encodeSimple('OK');
/** Valkey's validateClientAttr: every byte from '!' to '~'. */
const PRINTABLE_NO_SPACE = /^[\x21-\x7e]*$/;
const PONG = encodeSimple('PONG');

/**
 * The commands respool answers itself: they concern the client's own connection (protocol,
 * name, authentication), which in a pooled proxy is respool's, not the upstream's.
 * `command` is the table name ("client|setname" for subcommands); args[0] is the command.
 */
/** CLIENT REPLY OFF/SKIP: no reply at all (not even an empty one). */
export const NO_REPLY = Buffer.alloc(0);

export const local: Handler = (session, req) => {
  if (req.command === 'ping' && session.ctx.runningScripts.longRunning().length > 0) return pingBusyNode(session, req);
  if (req.command === 'select') return select(session, req);
  if (OBSERVE_COMMANDS.has(req.command) && (session.pending ?? 0) > 0) {
    // What earlier requests cost is recorded as their replies are written (observe/request-observer.ts):
    // answered once they are, as Valkey has run them all before it reads this one.
    session.runExclusive(() => session.replyNow(localReply(session, req.command, req.args)));
    return;
  }
  const identity = req.command === 'hello' ? (session.ctx.hello?.pending() ?? null) : null;
  if (identity !== null) {
    // A setting that renames the server went through respool: HELLO answers as the nodes now do.
    session.runExclusive(() => {
      const entry = session.reserve();
      void identity.then(() => entry.fill(localReply(session, req.command, req.args)));
    });
    return;
  }
  if (req.command === 'reset' && session.state.db !== 0) {
    // Back to database 0: a barrier, as SELECT is (see select()).
    session.runExclusive(() => {
      session.replyNow(localReply(session, req.command, req.args));
    });
    return;
  }
  const reply = localReply(session, req.command, req.args);
  if (reply !== NO_REPLY) session.replyNow(reply);
  // QUIT: +OK first, then the connection closes once every reply owed has been written.
  if (req.command === 'quit') session.closeAfterReplies();
};

/**
 * SELECT's argument as Valkey reads it (getIntFromObjectOrReply: string2ll, then the int range):
 * the index, or the error text. The range check against `databases` is the caller's.
 */
export function parseDbIndex(arg: Buffer): number | string {
  const text = arg.toString('latin1');
  // string2ll: no sign but '-', no leading zeros, no spaces, fewer than 21 characters.
  if (text.length >= 21 || !/^(?:0|-?[1-9][0-9]*)$/.test(text)) return ProxyError.invalidDb();
  const value = BigInt(text);
  if (value > 9223372036854775807n || value < -9223372036854775808n) return ProxyError.invalidDb();
  if (value > 2147483647n || value < -2147483648n) return ProxyError.intOutOfRange();
  return Number(value);
}

/**
 * SELECT n. In a cluster only 0 (Valkey's rule and text). Against a standalone upstream every
 * database it has (its `databases`, learned once: ServerContext.databases): the session's
 * commands then go on the shared links and leases of that database (a pool per database in use,
 * upstream/upstream-pools.ts). Changing databases is a barrier (runExclusive): the client's
 * earlier commands are answered before later ones go to the other database's links, so MOVE,
 * SWAPDB or COPY … DB followed by a SELECT see each other in order, as on one connection.
 * Inside MULTI (transaction.ts) and on a WATCH lane (watch-lane.ts) SELECT takes other paths.
 */
function select(session: HandlerSession, req: CommandRequest): void {
  const { ctx, state } = session;
  const db = parseDbIndex(req.args[1]!);
  if (typeof db === 'string') return session.replyNow(encodeError(db));
  const mode = ctx.router.topology()?.mode;
  if (db === state.db) return session.replyNow(OK);
  if (mode === undefined) return session.replyNow(encodeError(ProxyError.topologyUnknown()));
  if (mode === 'cluster') return session.replyNow(encodeError(ProxyError.selectNotAllowed()));
  if (db < 0) return session.replyNow(encodeError(ProxyError.dbOutOfRange()));
  // Tracking lanes are leased in database 0 (handlers/tracking.ts).
  if (state.tracking !== null) return session.replyNow(encodeError(ProxyError.selectWhileTracking()));
  session.runExclusive(() => {
    const entry = session.reserve();
    const apply = (inRange: boolean): void => {
      if (!inRange) return entry.fill(encodeError(ProxyError.dbOutOfRange()));
      state.select(db);
      entry.fill(OK);
    };
    if (db === 0) apply(true); // every server has database 0
    else void ctx.databases().then((databases) => apply(db < databases));
  });
}

/**
 * PING while a script has run long on some node: Valkey's BUSY if that node is busy (as a client
 * of that one server would see), else the usual PONG.
 */
function pingBusyNode(session: HandlerSession, req: CommandRequest): void {
  const ctx = session.ctx;
  const reply = localReply(session, req.command, req.args);
  const entry = session.reserve();
  ctx.runningScripts.busyReply((address) => oneShotTo(session, address)).then((busy) => entry.fill(busy ?? reply));
}

/** The reply to a local command (also used inside transactions, at EXEC). */
export function localReply(session: HandlerSession, command: string, args: Buffer[]): Buffer {
  const ctx = session.ctx;
  const state = session.state;
  const arg = (i: number) => args[i]!.toString('utf8');
  switch (command) {
    case 'ping':
      if (args.length > 2) return encodeError(ProxyError.wrongArity('ping')); // Valkey's pingCommand: its arity is -1
      // RESP2 subscribed mode: `*2 pong <message or empty>` (Valkey's pingCommand).
      if (state.subscribedResp2) return subscribedPong(args.length === 2 ? args[1]! : null);
      return args.length === 2 ? encodeBulk(args[1]!, state.protocol) : PONG;
    case 'echo':
      return encodeBulk(args[1]!, state.protocol);
    case 'quit':
      return OK;
    case 'select': {
      // Only queued inside MULTI in a cluster (transaction.ts); select() above otherwise.
      const db = parseDbIndex(args[1]!);
      if (typeof db === 'string') return encodeError(db);
      return db === state.db ? OK : encodeError(ProxyError.selectNotAllowed());
    }
    case 'auth': {
      if (args.length > 3) return encodeError(ProxyError.syntax()); // Valkey's authCommand
      const [user, password] = args.length === 3 ? [arg(1), args[2]!] : ['default', args[1]!];
      return authenticate(session, args[0]!, user, password, args.length === 2) ?? OK;
    }
    case 'hello':
      return hello(session, ctx, args);
    case 'reset':
      resetSubscriptions(session); // no confirmations, as Valkey; subscribes still pending upstream finish first
      ctx.monitors.remove(session); // MONITOR ends too (Valkey's clearClientConnectionState)
      state.reset();
      session.joinTenant(ctx.tenants.of(state.user), false); // back as the default user: its tenant, room or not (the client was already counted)
      return encodeSimple('RESET');
    case 'client|reply': {
      const mode = arg(2).toLowerCase();
      if (mode !== 'on' && mode !== 'off' && mode !== 'skip') return encodeError(ProxyError.syntax());
      state.setReplyMode(mode);
      return mode === 'on' ? OK : NO_REPLY; // Valkey sends nothing for OFF and SKIP
    }
    case 'client|no-evict': {
      // respool never evicts clients for memory (its bounds are per client), so ON and OFF both hold.
      const mode = arg(2).toLowerCase();
      return mode === 'on' || mode === 'off' ? OK : encodeError(ProxyError.syntax());
    }
    case 'info':
      return infoClients(session); // only `INFO clients` is local (commandFamily)
    case 'readonly':
    case 'readwrite':
      // Where a client's reads go is respool's read strategy (config reads.*), not the client's.
      return OK;
    case 'asking':
      // respool follows ASK redirects itself (routing/router.ts): nothing to remember.
      return OK;
    case 'client|setname': {
      const name = arg(2);
      if (/[\s]/.test(name) || /[^\x21-\x7e]/.test(name)) {
        return encodeError(ProxyError.badClientName());
      }
      state.setName(name);
      return OK;
    }
    case 'client|getname':
      return encodeBulk(state.name, state.protocol);
    case 'client|id':
      return encodeInteger(session.id);
    case 'client|info':
      state.readsOwnCount = true; // its scripts' commands count from now on (clients.scriptCommandCounts self)
      return encodeVerbatim(`${clientInfoLine(session)}\n`, state.protocol); // as Valkey: verbatim, the CLIENT LIST line
    case 'client|setinfo': {
      const attr = arg(2).toLowerCase();
      if (attr !== 'lib-name' && attr !== 'lib-ver') return encodeError(ProxyError.unrecognizedOption(arg(2)));
      // Valkey's validateClientAttr: printable ASCII without spaces, so CLIENT LIST splits by space.
      if (!PRINTABLE_NO_SPACE.test(args[3]!.toString('latin1'))) return encodeError(ProxyError.badClientAttr(arg(2)));
      state.setLib(attr, arg(3));
      return OK;
    }
    default:
      if (command.startsWith('acl|')) return aclReply(session, command, args); // respool's own users (handlers/acl.ts)
      if (OBSERVE_COMMANDS.has(command)) return observeReply(session, command, args); // SLOWLOG, COMMANDLOG, LATENCY HISTOGRAM
      if (CLIENT_COMMANDS.has(command)) return clientCommandReply(session, command, args); // inside MULTI, at EXEC
      // The cluster emulation's local answers, queued inside MULTI (handlers/cluster.ts).
      if (LOCAL_CLUSTER_COMMANDS.has(command)) return clusterReply(session, command, args);
      return encodeError(ProxyError.notLocal(command));
  }
}

/**
 * Null on success; the error reply otherwise. As Valkey's authCommand / ACLCheckUserCredentials
 * over respool's users (src/acl/user-directory.ts): `AUTH <password>` while the default user has
 * no password gets Valkey's "without any password configured" error; an unknown user, a user that
 * is off or a wrong password gets WRONGPASS, and an `auth` entry in ACL LOG (object: the command
 * as the client wrote it). With no users configured the default user is `on nopass +@all ~* &*`,
 * so `AUTH default anything` succeeds and `AUTH other x` is refused.
 */
function authenticate(session: HandlerSession, command: Buffer, user: string, password: Buffer, passwordOnly = false): Buffer | null {
  const { ctx, state } = session;
  const users = ctx.users;
  if (passwordOnly && users.defaultUser.nopass) return encodeError(ProxyError.authNotConfigured());
  const entry = users.get(user);
  if (!checkCredentials(entry, password)) {
    users.log.add('auth', state.transaction !== null ? 'multi' : 'toplevel', command.toString(), user, clientInfoLine(session));
    return encodeError(ProxyError.wrongPass());
  }
  // One of its user's tenant's clients from now: refused, as Valkey refuses a client past maxclients, when the tenant is full.
  const tenant = ctx.tenants.of(user);
  const joined = session.joinTenant(tenant, true);
  if (joined === 'full') return encodeError(ProxyError.tenantMaxClients(tenant!.name, tenant!.maxClients));
  if (joined === 'elsewhere') return encodeError(ProxyError.tenantElsewhere(user, tenant!.name));
  state.authenticate(user, entry!);
  return null;
}

/** HELLO [protover [AUTH user pass] [SETNAME name]] */
function hello(session: HandlerSession, ctx: ServerContext, args: Buffer[]): Buffer {
  const state = session.state;
  let protocol = state.protocol;
  let i = 1;
  if (args.length > 1) {
    const version = Number(args[1]!.toString());
    if (!Number.isInteger(version)) return encodeError(ProxyError.badProtocolVersion());
    if (version !== 2 && version !== 3) return encodeError(ProxyError.noProto());
    protocol = version;
    i = 2;
  }
  let name: string | undefined;
  for (; i < args.length; i++) {
    const option = args[i]!.toString().toLowerCase();
    if (option === 'auth' && i + 2 < args.length) {
      const failed = authenticate(session, args[0]!, args[i + 1]!.toString(), args[i + 2]!);
      if (failed) return failed;
      i += 2;
    } else if (option === 'setname' && i + 1 < args.length) {
      name = args[++i]!.toString();
    } else {
      return encodeError(ProxyError.helloSyntax(args[i]!.toString()));
    }
  }
  if (state.user === null) {
    return encodeError(ProxyError.helloNoAuth());
  }
  state.setProtocol(protocol);
  if (name !== undefined) state.setName(name);
  const s = (v: string) => encodeBulk(v, protocol);
  return encodeMap(
    [
      [s('server'), s(ctx.hello?.server ?? ctx.serverName())],
      [s('version'), s(ctx.hello?.version ?? ctx.serverVersion())],
      [s('proto'), encodeInteger(protocol)],
      [s('id'), encodeInteger(session.id)],
      [s('mode'), s('standalone')],
      [s('role'), s('master')],
      [s('modules'), encodeArray([])],
      [s('proxy'), s('respool')],
    ],
    protocol,
  );
}
