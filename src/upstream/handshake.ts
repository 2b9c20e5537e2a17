/** How respool authenticates to the upstream nodes (config.upstreamAuth). */
export type UpstreamAuth = { username: string | null; password: string } | null;

/** AUTH [username] password, as the upstream's auth calls for. */
export function authCommand(auth: NonNullable<UpstreamAuth>): string[] {
  return auth.username ? ['AUTH', auth.username, auth.password] : ['AUTH', auth.password];
}

/**
 * The commands that open a connection to a node as `clientName` in `protocol`, written back to
 * back: RESP3 takes AUTH and SETNAME inside HELLO 3; RESP2 sends AUTH (if any), then CLIENT
 * SETNAME. Then `SELECT db` for a connection that serves database `db` ≠ 0 (a standalone
 * upstream's other databases: a pool per database, upstream-pools.ts / lease-pools.ts); a
 * connection for db 0 sends no SELECT. Shared links, leased connections and subscriber
 * connections all open this way. `viaHello`: HELLO in both protocols (connections authenticated as
 * a user's upstream identity, src/acl/upstream-identity.ts).
 */
export function handshakeCommands(protocol: 2 | 3, auth: UpstreamAuth, clientName: string, db = 0, viaHello = false): string[][] {
  const steps: string[][] = [];
  if (viaHello) {
    // A user's upstream identity may be refused CLIENT SETNAME (@connection): HELLO's own AUTH and
    // SETNAME are not checked against the user's rules, in RESP2 (HELLO 2) as in RESP3.
    const hello = ['HELLO', String(protocol)];
    if (auth) hello.push('AUTH', auth.username ?? 'default', auth.password);
    hello.push('SETNAME', clientName);
    steps.push(hello);
  } else if (protocol === 3) {
    const hello = ['HELLO', '3'];
    if (auth) hello.push('AUTH', auth.username ?? 'default', auth.password);
    hello.push('SETNAME', clientName);
    steps.push(hello);
  } else {
    if (auth) steps.push(authCommand(auth));
    steps.push(['CLIENT', 'SETNAME', clientName]);
  }
  if (db !== 0) steps.push(['SELECT', String(db)]);
  return steps;
}
