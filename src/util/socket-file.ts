import { lstatSync, unlinkSync } from 'node:fs';
import net from 'node:net';

// A Unix socket's file: a stale one replaced, the file removed on close (session/unix-listener.ts;
// with workers the supervisor does both, workers/supervisor.ts).

/** Removes `path` if it is a socket file nobody answers on; throws when a server does. */
export async function replaceStale(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch {
    return; // nothing there
  }
  if (!isSocket) throw new Error(`unixSocket ${path} exists and is not a socket; respool leaves it alone`);
  const live = await new Promise<boolean>((resolve) => {
    const probe = net.connect({ path }, () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
  if (live) throw new Error(`unixSocket ${path} is in use: another server answers on it`);
  unlinkSync(path);
}

export function removeSocket(path: string): void {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch {
    /* already gone */
  }
}
