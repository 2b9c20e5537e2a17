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

/**
 * Reads from the kernel again after stopKernelReads, for a socket that stays in this process (a
 * takeover's TLS relay): resuming the stream alone does not, since TLS's own handle is what
 * stopped.
 */
export function startKernelReads(socket: Socket): void {
  const handle = (socket as unknown as { _handle: { reading?: boolean; readStart(): number } | null })._handle;
  if (handle === null || handle.reading === true) return;
  handle.reading = true;
  handle.readStart();
}
