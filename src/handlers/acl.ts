import { nodeCrypto } from '../util/lazy-builtins.js';
import { encodeArray, encodeBulk, encodeError, encodeInteger, encodeMap, encodeSet, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { ACL_CATEGORIES, RESPOOL_ADMIN_CATEGORY, describeChannels, describeCommands, describeKeys, describeUser, type AclUser } from '../acl/rules.js';
import { aclErrorMessage, checkCommand } from '../acl/command-check.js';
import { arityError } from '../commands/command-table.js';
import type { DirectoryClient, UserDirectory } from '../acl/user-directory.js';
import { sharePeerAcl } from '../workers/peer-commands.js';
import type { HandlerSession } from '../client/handler-session.js';

const OK = encodeSimple('OK');

/**
 * ACL …, answered from respool's users (src/acl/user-directory.ts) in Valkey 8.0.1's formats:
 * WHOAMI, LIST, USERS, CAT, DRYRUN, GENPASS, GETUSER, SETUSER, DELUSER, LOAD, SAVE (against
 * acl.file), LOG [count | RESET]. Changes apply at once to new and existing connections, reach
 * the nodes for mirrored users (upstream/identity-mirror.ts) and, with `workers: N`, the other
 * workers. Called from localReply (handlers/local.ts), so also at EXEC.
 */
export function aclReply(session: HandlerSession, command: string, args: Buffer[]): Buffer {
  const { ctx, state } = session;
  const users = ctx.users;
  const proto = state.protocol;
  const sub = command.slice(4);
  switch (sub) {
    case 'whoami':
      return encodeBulk(state.user, proto);
    case 'users':
      return encodeArray(users.list().map((u) => encodeBulk(u.name, proto)));
    case 'list':
      return encodeArray(users.list().map((u) => encodeBulk(`user ${u.name} ${describeUser(u)}`, proto)));
    case 'cat': {
      if (args.length === 2) return encodeArray(ACL_CATEGORIES.map((c) => encodeBulk(c, proto)));
      const name = args[2]!.toString();
      const category = name.toLowerCase();
      if (category === RESPOOL_ADMIN_CATEGORY) return encodeArray([encodeBulk('respool', proto)]);
      if (!ACL_CATEGORIES.includes(category)) return encodeError(ProxyError.aclUnknownCategory(name));
      const tag = `@${category}`;
      const out: Buffer[] = [];
      for (const cmd of ctx.commands().commands()) {
        if (cmd.aclCategories?.includes(tag)) out.push(encodeBulk(cmd.name, proto));
        if (cmd.subcommands) for (const s of cmd.subcommands.values()) if (s.aclCategories?.includes(tag)) out.push(encodeBulk(s.name, proto));
      }
      return encodeArray(out);
    }
    case 'dryrun': {
      const name = args[2]!.toString();
      const user = users.get(name);
      if (user === undefined) return encodeError(ProxyError.aclUserNotFound(name));
      const rest = args.slice(3);
      const target = ctx.commands().lookup(rest);
      if (target === undefined) return encodeError(ProxyError.aclCommandNotFound(rest[0]!.toString()));
      const arity = arityError(target, rest.length); // Valkey's aclCommand checks the named command's arity
      if (arity !== null) return encodeError(arity);
      const denial = checkCommand(user, target, rest, ctx.commands());
      if (denial === null) return OK;
      return encodeBulk(aclErrorMessage(denial, user, target.name, rest[denial.index], true), proto);
    }
    case 'genpass': {
      let bits = 256;
      if (args.length === 3) {
        const text = args[2]!.toString();
        bits = /^-?\d+$/.test(text) ? Number(text) : NaN;
        if (!Number.isInteger(bits) || bits <= 0 || bits > 4096) return encodeError(ProxyError.aclGenpassBits());
      }
      const chars = Math.floor((bits + 3) / 4);
      return encodeBulk(nodeCrypto().randomBytes(Math.ceil(chars / 2)).toString('hex').slice(0, chars), proto);
    }
    case 'getuser': {
      const user = users.get(args[2]!.toString());
      return user === undefined ? encodeBulk(null, proto) : getUserReply(user, proto);
    }
    case 'setuser':
    case 'deluser':
    case 'load': {
      const reply = applyAclChange(users, args, callerOf(session));
      if (reply[0] !== 0x2d /* - */) {
        sharePeerAcl(args); // workers: every worker's directory (src/workers)
        // A fleet: every member, within a beat, and members started later (src/fleet/fleet-acl.ts).
        ctx.fleetAcl?.share(args).catch((err: Error) => ctx.log.error({ event: 'fleet_acl_share_failed', err: err.message }, 'fleet: an ACL change made here could not be shared with the fleet'));
      }
      return reply;
    }
    case 'save': {
      const error = users.save();
      return error === null ? OK : encodeError(error);
    }
    case 'log': {
      if (args.length > 3) return encodeError(ProxyError.subcommandSyntax('ACL', args[1]!.toString()));
      let count = 10;
      if (args.length === 3) {
        const arg = args[2]!.toString();
        if (arg.toLowerCase() === 'reset') {
          users.log.reset();
          return OK;
        }
        if (!/^-?\d+$/.test(arg) || !Number.isSafeInteger(Number(arg))) return encodeError(ProxyError.notAnInteger());
        count = Math.max(0, Number(arg));
      }
      return users.log.reply(count, proto);
    }
    case 'help':
      return encodeArray(HELP.map((l) => encodeSimple(l)));
    default:
      return encodeError(ProxyError.subcommandSyntax('ACL', args[1]!.toString()));
  }
}

/**
 * ACL SETUSER / DELUSER / LOAD applied to a directory: the reply. Runs for a client here and,
 * with `workers: N`, for another worker's client (`caller` null: nobody to answer).
 */
export function applyAclChange(users: UserDirectory, args: readonly Buffer[], caller: DirectoryClient | null): Buffer {
  const sub = args[1]!.toString('latin1').toLowerCase();
  if (sub === 'setuser') {
    const error = users.setUser(args[2]!.toString(), args.slice(3).map((a) => a.toString()));
    return error === null ? OK : encodeError(error);
  }
  if (sub === 'deluser') {
    const deleted = users.delUsers(args.slice(2).map((a) => a.toString()), caller);
    return typeof deleted === 'number' ? encodeInteger(deleted) : encodeError(deleted);
  }
  const error = users.load(caller);
  return error === null ? OK : encodeError(error);
}

/** The session as the directory sees it, to close it after its reply if it deletes its own user. */
function callerOf(session: HandlerSession): DirectoryClient {
  return {
    id: session.id,
    user: session.state.user,
    subscribedNames: () => null,
    close: () => session.closeAfterReplies(),
  };
}

/** ACL GETUSER's map: flags, passwords, commands, keys, channels, selectors (none besides the root). */
function getUserReply(u: AclUser, proto: 2 | 3): Buffer {
  const s = (v: string) => encodeBulk(v, proto);
  const flags: string[] = [u.enabled ? 'on' : 'off'];
  if (u.nopass) flags.push('nopass');
  flags.push(u.skipSanitize ? 'skip-sanitize-payload' : 'sanitize-payload');
  return encodeMap([
    [s('flags'), encodeSet(flags.map(s), proto)],
    [s('passwords'), encodeArray(u.passwords.map(s))],
    [s('commands'), s(describeCommands(u))],
    [s('keys'), s(describeKeys(u))],
    [s('channels'), s(describeChannels(u))],
    [s('selectors'), encodeArray([])],
  ], proto);
}

const HELP = [
  'ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are (answered by respool from its users):',
  'CAT [<category>]',
  '    List all commands that belong to <category>, or all command categories',
  '    when no category is specified.',
  'DELUSER <username> [<username> ...]',
  '    Delete a list of users.',
  'DRYRUN <username> <command> [<arg> ...]',
  '    Returns whether the user can execute the given command without executing the command.',
  'GETUSER <username>',
  "    Get the user's details.",
  'GENPASS [<bits>]',
  '    Generate a secure 256-bit user password. The optional `bits` argument can',
  '    be used to specify a different size.',
  'LIST',
  '    Show users details in config file format.',
  'LOAD',
  "    Reload users from respool's ACL file (acl.file).",
  'LOG [<count> | RESET]',
  '    Show the ACL log entries.',
  'SAVE',
  "    Save the current users to respool's ACL file (acl.file).",
  'SETUSER <username> <attribute> [<attribute> ...]',
  '    Create or modify a user with the specified attributes.',
  'USERS',
  '    List all the registered usernames.',
  'WHOAMI',
  '    Return the current connection username.',
  'HELP',
  '    Print this help.',
];
