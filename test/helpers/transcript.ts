import { encodeCommand } from '../harness/raw-client.js';
import { RawConnection } from './raw-resp.js';

/**
 * Scripted command sequences run the same way against a reference valkey-server and through
 * respool, so their transcripts can be compared byte for byte (transactions, tracking tests).
 */

/** A step of a scripted sequence: which connection (0, 1, …) sends which command. */
export type Step = [conn: number, ...args: Array<string | number>];

/** A raw connection, switched to RESP3 when asked (the HELLO reply is not compared: it names the server). */
export async function connect(port: number, proto: 2 | 3): Promise<RawConnection> {
  const c = await RawConnection.connect(port);
  if (proto === 3) {
    const hello = await c.call('HELLO', '3');
    if (!hello.startsWith('%')) throw new Error(`HELLO 3 answered ${JSON.stringify(hello)}`);
  }
  return c;
}

/**
 * Runs `steps` one at a time against `port`, each step waiting for its reply, and returns one
 * line per step: the command and its exact reply bytes (JSON-escaped, so diffs show CR/LF).
 * `afterStep` may add lines after each step (the tracking tests list the pushes that arrived).
 */
export async function transcript(
  port: number,
  proto: 2 | 3,
  steps: Step[],
  afterStep?: (conns: ReadonlyMap<number, RawConnection>, out: string[]) => Promise<void>,
): Promise<string[]> {
  const conns = new Map<number, RawConnection>();
  const out: string[] = [];
  try {
    for (const [i, ...args] of steps) {
      let c = conns.get(i);
      if (c === undefined) {
        c = await connect(port, proto);
        conns.set(i, c);
      }
      let reply: string;
      try {
        c.send(...args);
        reply = JSON.stringify(await c.read(4000));
      } catch (e) {
        reply = `<${(e as Error).message}>`;
      }
      out.push(`[${i}] ${args.join(' ')} -> ${reply}`);
      await afterStep?.(conns, out);
    }
  } finally {
    for (const c of conns.values()) c.close();
  }
  return out;
}

/**
 * Sends `commands` in one write (a pipeline) on one connection and returns each reply's exact
 * bytes (JSON-escaped), in order: the comparison for pipelines whose order must hold.
 */
export async function pipelineTranscript(port: number, proto: 2 | 3, commands: Array<Array<string | number>>, timeoutMs = 10_000): Promise<string[]> {
  const c = await connect(port, proto);
  try {
    c.write(Buffer.concat(commands.map((args) => encodeCommand(args))));
    const out: string[] = [];
    for (const args of commands) out.push(`${args.join(' ')} -> ${JSON.stringify(await c.read(timeoutMs))}`);
    return out;
  } finally {
    c.close();
  }
}
