import { decodeReply, RespError, type RespValue } from '../resp/decode.js';

/**
 * The flags of the functions the nodes hold (FUNCTION LIST), for the one decision that needs them
 * at respool: whether CLIENT PAUSE WRITE holds an FCALL / FCALL_RO (client/client-pause.ts). Valkey
 * takes a function's flags in place of the command's (fcallGetCommandFlags): a function registered
 * with `flags={'no-writes'}` neither writes nor replicates, so a WRITE pause lets it run at once.
 *
 *   known    : function name → its flags, as the last FUNCTION LIST answered (functions are the
 *              same on every node: FUNCTION LOAD goes to all of them)
 *   refresh  : asked again when a pause starts, and when an FCALL of a function not known arrives during a
 *              pause (which holds it, as Valkey holds a function whose flags say nothing, until the
 *              answer says otherwise); one question in flight at a time
 *   forget   : a FUNCTION LOAD / DELETE / FLUSH / RESTORE through respool drops what was known
 */
export class FunctionFlags {
  private known = new Map<string, readonly string[]>();
  private asking: Promise<void> | null = null;

  /** `list`: FUNCTION LIST on a node, its reply frame (RESP2). */
  constructor(private readonly list: () => Promise<Buffer>) {}

  /** A function's flags; undefined when respool does not know it (yet). */
  flagsOf(name: string): readonly string[] | undefined {
    return this.known.get(name);
  }

  /** A FUNCTION LOAD / DELETE / FLUSH / RESTORE went to the nodes: what was known may be stale. */
  forget(): void {
    this.known = new Map();
  }

  /** Asks the nodes again (once, if a question is in flight already). Never rejects. */
  refresh(): Promise<void> {
    return (this.asking ??= this.list()
      .then((frame) => {
        const next = parseFunctionList(decodeReply(frame));
        if (next !== null) this.known = next;
      }, () => undefined)
      .finally(() => {
        this.asking = null;
      }));
  }
}

/** FUNCTION LIST's reply: every library's functions and their flags; null for an error. */
export function parseFunctionList(reply: RespValue): Map<string, readonly string[]> | null {
  if (reply instanceof RespError || !Array.isArray(reply)) return null;
  const out = new Map<string, readonly string[]>();
  for (const library of reply) {
    const functions = field(library, 'functions');
    if (!Array.isArray(functions)) continue;
    for (const fn of functions) {
      const name = field(fn, 'name');
      const flags = field(fn, 'flags');
      if (name === undefined) continue;
      out.set(text(name), Array.isArray(flags) ? flags.map(text) : []);
    }
  }
  return out;
}

/** A field of a RESP2 flat [key, value, …] array, or of a RESP3 map. */
function field(value: RespValue, key: string): RespValue | undefined {
  if (value instanceof Map) {
    for (const [k, v] of value) if (text(k) === key) return v;
    return undefined;
  }
  if (!Array.isArray(value)) return undefined;
  for (let i = 0; i + 1 < value.length; i += 2) if (text(value[i]!) === key) return value[i + 1];
  return undefined;
}

function text(v: RespValue): string {
  return Buffer.isBuffer(v) ? v.toString('utf8') : String(v);
}
