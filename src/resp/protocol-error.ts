/**
 * A peer broke the RESP protocol. Messages follow Valkey's wording ("Protocol error: invalid
 * bulk length") so a session can answer a client with "-ERR " + message before closing, exactly
 * as Valkey would.
 */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}
