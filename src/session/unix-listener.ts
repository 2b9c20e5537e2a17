import cluster from 'node:cluster';
import { chmodSync } from 'node:fs';
import net from 'node:net';
import { removeSocket, replaceStale } from '../util/socket-file.js';
import { acceptReadingShared } from './shared-reads.js';

/**
 * A Unix domain socket clients connect to (config.unixSocket): the cheaper hop for a sidecar's
 * application on the same host. Its connections take the same path as TCP ones (`accept`).
 *
 *   stale   : a socket file left by a respool that died is replaced; a path some live server
 *             answers on is an error (two respools must not share one), as is a path that is not
 *             a socket (never removed)
 *   mode    : chmod to config.unixSocketMode once listening (the umask decides until then)
 *   close   : the file is removed (a worker leaves it to the supervisor, which shares it)
 */
export async function listenUnix(path: string, mode: number, accept: (socket: net.Socket) => void): Promise<{ close(): void }> {
  if (!cluster.isWorker) await replaceStale(path);
  const server = net.createServer({ pauseOnConnect: true }, accept);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ path, backlog: 4096 }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(path, mode);
  acceptReadingShared(server);
  return {
    close() {
      server.close();
      if (!cluster.isWorker) removeSocket(path);
    },
  };
}
