import type { CommandRequest, HandlerSession } from '../client/handler-session.js';
import { ProxyError } from '../errors.js';
import { encodeBulk, encodeError, encodeInteger, encodeMap, encodeSimple } from '../resp/encode.js';
import { Migration, MigrationRefusal } from '../migration/migration.js';

export const RESPOOL_MIGRATE_HELP = [
  'RESPOOL MIGRATE START <host:port> [MERGE] -- copies the keyspace to the target under traffic; writes carried until CUTOVER (docs/migration.md)',
  'RESPOOL MIGRATE STATUS                -- state (copying, paused, verifying, synced, cut-over …) and counts: copied, mirrored, recopied, mismatched',
  'RESPOOL MIGRATE VERIFY                -- compares the verifier\'s sample of keys on both sides again; the differences found',
  'RESPOOL MIGRATE CUTOVER               -- holds writes, drains them, points respool at the target; the pause in ms',
  'RESPOOL MIGRATE ABORT                 -- stops before the cutover (an emptied target is emptied again; the source untouched), or within migration.rollbackWindowMs after it switches back to the source',
];

/** RESPOOL MIGRATE START | STATUS | VERIFY | CUTOVER | ABORT (src/migration/migration.ts); in a worker other than the coordinator, run by the coordinator. */
export function respoolMigrate(session: HandlerSession, req: CommandRequest): void {
  const migration = session.ctx.migration;
  if (migration === undefined) return session.replyNow(encodeError(ProxyError.respool('a migration moves the main upstreams; this client\'s tenant has upstreams of its own')));
  const entry = session.reserve();
  const work = migration instanceof Migration ? migrateReply(migration, req.args, session.state.protocol) : migration.command(req.args, session.state.protocol);
  void work.then((reply) => entry.fill(reply));
}

/** RESPOOL MIGRATE's reply, run on the migration's own process (a member's clients' too: migration-members.ts). */
export async function migrateReply(migration: Migration, args: readonly Buffer[], proto: 2 | 3): Promise<Buffer> {
  const what = args[2]?.toString('latin1').toUpperCase();
  const n = args.length;
  try {
    if (what === 'STATUS' && n === 3) {
      const fields = Object.entries(migration.status()).map(([k, v]) => [encodeBulk(k, proto), v === null ? encodeBulk(null, proto) : typeof v === 'number' && Number.isInteger(v) ? encodeInteger(v) : encodeBulk(String(v), proto)] as [Buffer, Buffer]);
      return encodeMap(fields, proto);
    }
    if (what === 'START' && (n === 4 || (n === 5 && args[4]!.toString('latin1').toUpperCase() === 'MERGE'))) {
      const target = parseAddress(args[3]!.toString('latin1'));
      if (target === null) return encodeError('ERR the target must be host:port');
      await migration.start({ target, merge: n === 5 });
      return encodeSimple('OK');
    }
    if (what === 'CUTOVER' && n === 3) return encodeBulk(`cut over: writes held ${await migration.cutover()} ms`, proto);
    if (what === 'ABORT' && n === 3) {
      const { flushed, rolledBack } = await migration.abort();
      return encodeBulk(rolledBack ? 'rolled back: the upstreams are the source again' : flushed ? 'aborted: the target was emptied' : 'aborted', proto);
    }
    if (what === 'VERIFY' && n === 3) {
      const { compared, mismatched } = await migration.verifyNow();
      return encodeMap([[encodeBulk('compared', proto), encodeInteger(compared)], [encodeBulk('mismatched', proto), encodeInteger(mismatched)]], proto);
    }
  } catch (err) {
    return encodeError(err instanceof MigrationRefusal ? ProxyError.respool(`migration: ${err.message}`) : `ERR ${(err as Error).message}`);
  }
  return encodeError(`ERR unknown subcommand or wrong number of arguments for 'RESPOOL MIGRATE${what === undefined ? '' : ` ${what}`}'. Try RESPOOL HELP.`);
}

/** "host:port" ([v6]:port too). */
export function parseAddress(text: string): { host: string; port: number } | null {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(text);
  if (m === null) return null;
  const port = Number(m[2]);
  return port > 0 && port < 65536 ? { host: m[1]!, port } : null;
}
