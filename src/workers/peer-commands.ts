import cluster from 'node:cluster';

/**
 * With `workers: N`, a RESPOOL SPLIT change a client makes on one worker must reach the others
 * (each worker routes its own clients' commands): the worker that ran it sends it to the
 * supervisor, which passes it to every other worker, where it runs as if sent there. Replies of
 * the copies are dropped (the client already has the first worker's).
 */
export const PEER_COMMAND_MESSAGE = 'respool:peer-command';

/** RESPOOL SPLIT subcommands that change the split rules (LIST only reads). */
const CHANGES: ReadonlySet<string> = new Set(['ADD', 'ADDPREFIX', 'ADDPATTERN', 'DEL']);

export interface PeerCommandMessage {
  type: typeof PEER_COMMAND_MESSAGE;
  /** The command's arguments, base64 (IPC is JSON). */
  args: string[];
}

/** In a worker: passes a RESPOOL command that changed the split rules or a tenant's limits on to the other workers. */
export function sharePeerCommand(args: readonly Buffer[], reply: Buffer): void {
  if (!cluster.isWorker || process.send === undefined || reply[0] === 0x2d /* an error changed nothing */) return;
  if (!isPeerTenant(args) && (args[1]?.toString('latin1').toUpperCase() !== 'SPLIT' || !CHANGES.has(args[2]?.toString('latin1').toUpperCase() ?? ''))) return;
  const message: PeerCommandMessage = { type: PEER_COMMAND_MESSAGE, args: args.map((a) => a.toString('base64')) };
  process.send(message);
}

/**
 * In a worker: an ACL change (SETUSER, DELUSER, LOAD) that succeeded here, for the other workers'
 * user directories (each worker checks its own clients' commands). The message holds the rules,
 * passwords included, and travels only over the supervisor's IPC channel.
 */
export function sharePeerAcl(args: readonly Buffer[]): void {
  if (!cluster.isWorker || process.send === undefined) return;
  const message: PeerCommandMessage = { type: PEER_COMMAND_MESSAGE, args: args.map((a) => a.toString('base64')) };
  process.send(message);
}

/** True for RESPOOL TENANT SET (another worker changed a tenant's limits). */
export function isPeerTenant(args: readonly Buffer[]): boolean {
  return args[1]?.toString('latin1').toUpperCase() === 'TENANT' && args[2]?.toString('latin1').toUpperCase() === 'SET';
}

/** True for a shared ACL change (sharePeerAcl), false for a RESPOOL command. */
export function isPeerAcl(args: readonly Buffer[]): boolean {
  return args[0]?.toString('latin1').toUpperCase() === 'ACL';
}

/** In a worker: an automatic split this worker decided, as the RESPOOL SPLIT ADD the others run. */
export function shareAutoSplit(key: string, copies: number | null): void {
  const args = ['RESPOOL', 'SPLIT', 'ADD', key, ...(copies === null ? [] : [String(copies)])].map((a) => Buffer.from(a));
  sharePeerCommand(args, Buffer.from('+OK\r\n'));
}

/** In a worker: runs what another worker shared. */
export function onPeerCommand(run: (args: Buffer[]) => void): void {
  process.on('message', (msg: unknown) => {
    const m = msg as Partial<PeerCommandMessage> | null;
    if (m?.type === PEER_COMMAND_MESSAGE && Array.isArray(m.args)) run(m.args.map((a) => Buffer.from(a, 'base64')));
  });
}
