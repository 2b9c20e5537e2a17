import type { CommandRequest, HandlerSession } from '../client/handler-session.js';
import { ProxyError } from '../errors.js';
import { encodeBulk, encodeError, encodeInteger, encodeMap, encodeSimple } from '../resp/encode.js';
import { MigrationRefusal } from '../migration/migration.js';

export const RESPOOL_MIGRATE_HELP = [
  'RESPOOL MIGRATE START <host:port> [MERGE] -- copies the keyspace to the target under traffic; writes carried until CUTOVER (docs/migration.md)',
  'RESPOOL MIGRATE STATUS                -- state (copying, paused, verifying, synced, cut-over …) and counts: copied, mirrored, recopied, mismatched',
  'RESPOOL MIGRATE VERIFY                -- compares the verifier\'s sample of keys on both sides again; the differences found',
  'RESPOOL MIGRATE CUTOVER               -- holds writes, drains them, points respool at the target; the pause in ms',
  'RESPOOL MIGRATE ABORT                 -- stops before the cutover (an emptied target is emptied again; the source untouched), or within migration.rollbackWindowMs after it switches back to the source',
];

/** RESPOOL MIGRATE START | STATUS | VERIFY | CUTOVER | ABORT (src/migration/migration.ts). */
export function respoolMigrate(session: HandlerSession, req: CommandRequest): void {
  const migration = session.ctx.migration;
  const proto = session.state.protocol;
  const what = req.args[2]?.toString('latin1').toUpperCase();
  const n = req.args.length;
  if (migration === undefined) return session.replyNow(encodeError(ProxyError.respool('a migration moves the main upstreams; this client\'s tenant has upstreams of its own')));
  if (what === 'STATUS' && n === 3) {
    const fields = Object.entries(migration.status()).map(([k, v]) => [encodeBulk(k, proto), v === null ? encodeBulk(null, proto) : typeof v === 'number' && Number.isInteger(v) ? encodeInteger(v) : encodeBulk(String(v), proto)] as [Buffer, Buffer]);
    return session.replyNow(encodeMap(fields, proto));
  }
  const later = (work: () => Promise<Buffer>) => {
    const entry = session.reserve();
    work().then(
      (reply) => entry.fill(reply),
      (err) => entry.fill(encodeError(err instanceof MigrationRefusal ? ProxyError.respool(`migration: ${err.message}`) : `ERR ${(err as Error).message}`)),
    );
  };
  if (what === 'START' && (n === 4 || (n === 5 && req.args[4]!.toString('latin1').toUpperCase() === 'MERGE'))) {
    const target = parseAddress(req.args[3]!.toString('latin1'));
    if (target === null) return session.replyNow(encodeError('ERR the target must be host:port'));
    return later(async () => {
      await migration.start({ target, merge: n === 5 });
      return encodeSimple('OK');
    });
  }
  if (what === 'CUTOVER' && n === 3) return later(async () => encodeBulk(`cut over: writes held ${await migration.cutover()} ms`, proto));
  if (what === 'ABORT' && n === 3) {
    return later(async () => {
      const { flushed, rolledBack } = await migration.abort();
      return encodeBulk(rolledBack ? 'rolled back: the upstreams are the source again' : flushed ? 'aborted: the target was emptied' : 'aborted', proto);
    });
  }
  if (what === 'VERIFY' && n === 3) {
    return later(async () => {
      const { compared, mismatched } = await migration.verifyNow();
      return encodeMap([[encodeBulk('compared', proto), encodeInteger(compared)], [encodeBulk('mismatched', proto), encodeInteger(mismatched)]], proto);
    });
  }
  session.replyNow(encodeError(`ERR unknown subcommand or wrong number of arguments for 'RESPOOL MIGRATE${what === undefined ? '' : ` ${what}`}'. Try RESPOOL HELP.`));
}

/** "host:port" ([v6]:port too). */
export function parseAddress(text: string): { host: string; port: number } | null {
  const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(text);
  if (m === null) return null;
  const port = Number(m[2]);
  return port > 0 && port < 65536 ? { host: m[1]!, port } : null;
}
