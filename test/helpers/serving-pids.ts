/**
 * Which worker serves a connection under `--workers N` (src/workers): respool answers INFO server
 * with the process_id of the worker the connection landed on (never the supervisor's).
 */
import { RawConnection } from './raw-resp.js';

/** The pid of the worker serving the open connection `c` (its INFO server process_id). */
export async function pidServing(c: RawConnection): Promise<number> {
  const reply = await c.call('INFO', 'server');
  const m = /process_id:(\d+)/.exec(reply);
  if (m === null) throw new Error(`no process_id in INFO server: ${JSON.stringify(reply.slice(0, 200))}`);
  return Number(m[1]);
}

/** The pid of the worker serving a new connection to 127.0.0.1:port. */
export async function servingPid(port: number): Promise<number> {
  const c = await RawConnection.connect(port);
  try {
    return await pidServing(c);
  } finally {
    c.close();
  }
}

/** The pids of the workers serving new connections to 127.0.0.1:port, over `tries` connections one after another. */
export async function servingPids(port: number, tries = 8): Promise<Set<number>> {
  const pids = new Set<number>();
  for (let i = 0; i < tries; i++) pids.add(await servingPid(port));
  return pids;
}
