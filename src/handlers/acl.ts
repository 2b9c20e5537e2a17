import { randomBytes } from 'node:crypto';
import { encodeArray, encodeBulk, encodeError, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import {
  ACL_CATEGORIES,
  RESPOOL_ADMIN_CATEGORY,
  aclErrorMessage,
  checkCommand,
  describeUser,
  usersOf,
  wrongArity,
  type AclUser,
} from '../acl/users.js';
import type { HandlerSession } from './types.js';

/**
 * ACL …, answered from respool's own users (src/acl/users.ts) in Valkey 8.0.1's formats: WHOAMI,
 * LIST (config-file lines, sorted by name), USERS, CAT [category], DRYRUN user command args…,
 * GENPASS [bits]. SETUSER, DELUSER, GETUSER, LOAD, SAVE, LOG are refused: users come from
 * respool's configuration. Called from localReply (handlers/local.ts), so also at EXEC.
 */
export function aclReply(session: HandlerSession, command: string, args: Buffer[]): Buffer {
  const { ctx, state } = session;
  const spec = ctx.commands().get(command);
  if (spec !== undefined && wrongArity(spec, args.length)) return encodeError(ProxyError.wrongArity(command));
  const acl = usersOf(ctx.config);
  const proto = state.protocol;
  const sub = command.slice(4);
  switch (sub) {
    case 'whoami':
      return encodeBulk(state.user, proto);
    case 'users':
      return encodeArray(sortedUsers(acl.byName).map((u) => encodeBulk(u.name, proto)));
    case 'list':
      return encodeArray(sortedUsers(acl.byName).map((u) => encodeBulk(`user ${u.name} ${describeUser(u)}`, proto)));
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
      const user = acl.byName.get(name);
      if (user === undefined) return encodeError(ProxyError.aclUserNotFound(name));
      const rest = args.slice(3);
      const target = ctx.commands().lookup(rest);
      if (target === undefined) return encodeError(ProxyError.aclCommandNotFound(rest[0]!.toString()));
      if (wrongArity(target, rest.length)) return encodeError(ProxyError.wrongArity(target.name));
      const denial = checkCommand(user, target, rest, ctx.commands());
      if (denial === null) return encodeSimple('OK');
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
      return encodeBulk(randomBytes(Math.ceil(chars / 2)).toString('hex').slice(0, chars), proto);
    }
    case 'help':
      return encodeArray(
        [
          'ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are (answered by respool from its configured users):',
          'CAT [<category>]',
          'DRYRUN <username> <command> [<arg> ...]',
          'GENPASS [<bits>]',
          'LIST',
          'USERS',
          'WHOAMI',
          'SETUSER, DELUSER, GETUSER, LOAD, SAVE and LOG are not available: users come from respool\'s configuration.',
        ].map((l) => encodeSimple(l)),
      );
    default:
      return encodeError(ProxyError.aclFromConfig(sub));
  }
}

function sortedUsers(byName: ReadonlyMap<string, AclUser>): AclUser[] {
  return [...byName.values()].sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
}
