/**
 * The arguments of a command as MONITOR, SLOWLOG and COMMANDLOG show them: Valkey 8.0.1 replaces
 * secrets with "(redacted)" (redactClientCommandArgument) before any of them sees the command —
 * AUTH's password (and user), HELLO … AUTH's user and password, MIGRATE's AUTH / AUTH2, the value
 * of a sensitive CONFIG SET parameter, ACL SETUSER / DELUSER / GETUSER's arguments.
 */

const REDACTED = Buffer.from('(redacted)');

/** Valkey's SENSITIVE_CONFIG parameters (config.c), with their aliases. */
const SENSITIVE_CONFIGS: ReadonlySet<string> = new Set([
  'primaryuser', 'masteruser', 'primaryauth', 'masterauth', 'requirepass', 'tls-key-file-pass', 'tls-client-key-file-pass',
]);

const lower = (b: Buffer) => b.toString('latin1').toLowerCase();

/** `args` with Valkey's redactions applied (the same array when nothing is secret). */
export function shownArgs(command: string, args: readonly Buffer[]): readonly Buffer[] {
  const secret = secretIndexes(command, args);
  if (secret.length === 0) return args;
  const out = args.slice();
  for (const i of secret) out[i] = REDACTED;
  return out;
}

function secretIndexes(command: string, args: readonly Buffer[]): number[] {
  const from = (start: number) => Array.from({ length: Math.max(0, args.length - start) }, (_, i) => start + i);
  switch (command) {
    case 'auth':
      return args.length === 2 ? [1] : args.length === 3 ? [1, 2] : [];
    case 'hello': {
      const out: number[] = [];
      for (let j = 2; j < args.length; j++) {
        const opt = lower(args[j]!);
        if (opt === 'auth' && j + 2 < args.length) {
          out.push(j + 1, j + 2);
          j += 2;
        } else if (opt === 'setname' && j + 1 < args.length) {
          j++;
        }
      }
      return out;
    }
    case 'migrate': {
      const out: number[] = [];
      for (let j = 6; j < args.length; j++) {
        const opt = lower(args[j]!);
        if (opt === 'auth' && j + 1 < args.length) out.push(++j);
        else if (opt === 'auth2' && j + 2 < args.length) out.push(++j, ++j);
        else if (opt === 'keys') break;
      }
      return out;
    }
    case 'config|set': {
      const out: number[] = [];
      for (let j = 2; j + 1 < args.length; j += 2) if (SENSITIVE_CONFIGS.has(lower(args[j]!))) out.push(j + 1);
      return out;
    }
    case 'acl|setuser':
    case 'acl|deluser':
      return from(2);
    case 'acl|getuser':
      return args.length === 3 ? [2] : [];
    default:
      return [];
  }
}
