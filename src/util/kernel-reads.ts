import type { Socket } from 'node:net';

/**
 * Stops the reads from the kernel now. A paused stream keeps reading into its buffer (only the
 * shared-buffer sockets stop: session/shared-reads.ts); what the client sends from now on must
 * stay in the kernel for the process the socket goes to.
 */
export function stopKernelReads(socket: Socket): void {
  const handle = (socket as unknown as { _handle: { reading?: boolean; readStop(): number } | null })._handle;
  if (handle === null) return;
  handle.reading = false;
  handle.readStop();
}
