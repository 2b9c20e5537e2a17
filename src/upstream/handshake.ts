/** How respool authenticates to the upstream nodes (config.upstreamAuth). */
export type UpstreamAuth = { username: string | null; password: string } | null;

/** AUTH [username] password, as the upstream's auth calls for. */
export function authCommand(auth: NonNullable<UpstreamAuth>): string[] {
  return auth.username ? ['AUTH', auth.username, auth.password] : ['AUTH', auth.password];
}

/**
 * The commands that open a connection to a node as `clientName` in `protocol`, written back to
 * back: RESP3 takes AUTH and SETNAME inside HELLO 3; RESP2 sends AUTH (if any), then CLIENT
 * SETNAME. Shared links, leased connections and subscriber connections all open this way.
 */
export function handshakeCommands(protocol: 2 | 3, auth: UpstreamAuth, clientName: string): string[][] {
  if (protocol === 3) {
    const hello = ['HELLO', '3'];
    if (auth) hello.push('AUTH', auth.username ?? 'default', auth.password);
    hello.push('SETNAME', clientName);
    return [hello];
  }
  const steps: string[][] = [];
  if (auth) steps.push(authCommand(auth));
  steps.push(['CLIENT', 'SETNAME', clientName]);
  return steps;
}
