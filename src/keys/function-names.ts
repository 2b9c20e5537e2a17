import { bulkPayload, splitAggregate } from '../resp/decode.js';
import { encodeBulk, encodeInteger } from '../resp/encode.js';

/**
 * Function libraries per namespace. Valkey keeps one set of libraries per server, and its library
 * and function names are identifiers (letters, digits, `_`): a namespace such as `a:` cannot go
 * in front of them as it goes in front of keys. So a namespaced user's libraries and functions
 * are stored behind a marker made of its namespace in hex — `a:` → `ns613a__` — and turned back
 * wherever a name comes back:
 *
 *   FUNCTION LOAD "#!lua name=lib\n redis.register_function('f', …)"
 *       → "#!lua name=ns613a__lib\n redis.register_function('ns613a__f', …)"   reply "lib"
 *   FCALL f 1 k            → FCALL ns613a__f 1 a:k
 *   FUNCTION DELETE lib    → FUNCTION DELETE ns613a__lib
 *   FUNCTION LIST [LIBRARYNAME p] → LIBRARYNAME ns613a__p (or ns613a__*): the namespace's libraries,
 *                            their names and code as the client loaded them
 *
 * The code is rewritten where it names a function: `register_function('f'` / `("f"` and
 * `function_name = 'f'` (the table form). A name a library computes at run time is not seen, and
 * its function is stored under that name — reachable by FCALL from no namespace (docs/key-names.md).
 */
export class FunctionNames {
  /** What every stored library and function name of the namespace starts with. */
  readonly marker: Buffer;
  private readonly markerText: string;

  constructor(namespace: Buffer) {
    this.markerText = `ns${namespace.toString('hex')}__`;
    this.marker = Buffer.from(this.markerText, 'latin1');
  }

  /** A library's or function's name as the nodes store it. */
  storedName(name: Buffer): Buffer {
    return Buffer.concat([this.marker, name]);
  }

  /** The client's name for a stored one, or null when it is not the namespace's. */
  clientName(stored: Buffer): Buffer | null {
    const m = this.marker;
    if (stored.length < m.length || stored.compare(m, 0, m.length, 0, m.length) !== 0) return null;
    return stored.subarray(m.length);
  }

  /** A library's code with its library name and the names it registers behind the marker. */
  storedCode(code: Buffer): Buffer {
    const marker = this.markerText;
    const text = code.toString('latin1');
    const body = text.replace(SHEBANG_NAME, (_all, head: string, name: string) => `${head}${marker}${name}`);
    return Buffer.from(body.replace(REGISTERED_NAME, (_all, head: string, q: string, name: string) => `${head}${q}${marker}${name}${q}`), 'latin1');
  }

  /** The code as the client loaded it (what storedCode did, undone). */
  clientCode(code: Buffer): Buffer {
    const marker = this.markerText;
    const strip = (name: string) => (name.startsWith(marker) ? name.slice(marker.length) : name);
    const text = code.toString('latin1');
    const body = text.replace(SHEBANG_NAME, (_all, head: string, name: string) => `${head}${strip(name)}`);
    return Buffer.from(body.replace(REGISTERED_NAME, (_all, head: string, q: string, name: string) => `${head}${q}${strip(name)}${q}`), 'latin1');
  }

  /** An error's text without the marker (ERR Library 'ns613a__lib' already exists → 'lib'). */
  clientError(reply: Buffer): Buffer {
    if (reply[0] !== 0x2d /* - */ && reply[0] !== 0x21 /* ! */) return reply;
    if (reply.indexOf(this.marker) < 0) return reply;
    const text = reply.toString('latin1');
    if (reply[0] === 0x2d) return Buffer.from(text.split(this.markerText).join(''), 'latin1');
    const body = text.slice(text.indexOf('\r\n') + 2, -2).split(this.markerText).join('');
    return Buffer.from(`!${Buffer.byteLength(body, 'latin1')}\r\n${body}\r\n`, 'latin1');
  }

  /**
   * FUNCTION LIST's reply as the client's: only the namespace's libraries (the request asked the
   * node for them: its LIBRARYNAME pattern matches names without regard to case), each with its
   * name, its functions' names and its code as the client loaded them. RESP2 and RESP3 alike:
   * each library and function is a flat list (or map) of field, value.
   */
  clientLibraries(reply: Buffer): Buffer {
    const libraries = reply[0] === 0x2a || reply[0] === 0x7e ? splitAggregate(reply) : null;
    if (libraries === null) return reply;
    const kept: Buffer[] = [];
    for (const library of libraries) {
      let ours = false;
      const fields = this.changeFields(library, (field, value) => {
        if (field === 'library_name') {
          const name = bulkPayload(value);
          const client = name === null ? null : this.clientName(name);
          ours = client !== null;
          return client === null ? value : encodeBulk(client, 2);
        }
        if (field === 'library_code') {
          const code = bulkPayload(value);
          return code === null ? value : encodeBulk(this.clientCode(code), 2);
        }
        if (field === 'functions') return this.clientFunctions(value);
        return value;
      });
      if (ours) kept.push(fields);
    }
    return Buffer.concat([Buffer.from(`${String.fromCharCode(reply[0]!)}${kept.length}\r\n`, 'latin1'), ...kept]);
  }

  /**
   * FUNCTION STATS as the client's: the running function named as the client called it (nil when
   * it is another namespace's), and the Lua engine's counts those of the namespace's libraries in
   * `list` (FUNCTION LIST LIBRARYNAME <marker>* from the same node; null when it could not answer,
   * busy: the counts then stay the node's).
   */
  clientStats(stats: Buffer, list: Buffer | null): Buffer {
    if (stats[0] === 0x2d) return this.clientError(stats);
    const resp3 = stats[0] === 0x25;
    const counts = list === null || list[0] === 0x2d ? null : this.libraryCounts(list);
    return this.changeFields(stats, (field, value) => {
      if (field === 'running_script') return this.clientRunning(value, resp3);
      if (field !== 'engines' || counts === null) return value;
      return this.changeFields(value, (engine, info) =>
        engine !== 'LUA'
          ? info
          : this.changeFields(info, (f, v) => (f === 'libraries_count' ? encodeInteger(counts.libraries) : f === 'functions_count' ? encodeInteger(counts.functions) : v)),
      );
    });
  }

  private clientRunning(running: Buffer, resp3: boolean): Buffer {
    if (running[0] !== 0x2a && running[0] !== 0x25) return running; // nothing runs
    let ours = false;
    const renamed = this.changeFields(running, (field, value) => {
      if (field === 'name') {
        const name = bulkPayload(value);
        const client = name === null ? null : this.clientName(name);
        ours = client !== null;
        return client === null ? value : encodeBulk(client, 2);
      }
      if (field !== 'command' || (value[0] !== 0x2a && value[0] !== 0x7e)) return value;
      const words = splitAggregate(value) ?? [];
      const name = words.length > 1 ? bulkPayload(words[1]!) : null;
      const client = name === null ? null : this.clientName(name);
      if (client !== null) words[1] = encodeBulk(client, 2);
      return Buffer.concat([Buffer.from(`*${words.length}\r\n`, 'latin1'), ...words]);
    });
    return ours ? renamed : Buffer.from(resp3 ? '_\r\n' : '$-1\r\n', 'latin1');
  }

  private libraryCounts(list: Buffer): { libraries: number; functions: number } {
    let libraries = 0;
    let functions = 0;
    const all = list[0] === 0x2a || list[0] === 0x7e ? splitAggregate(list) : null;
    for (const library of all ?? []) {
      let ours = false;
      let count = 0;
      this.changeFields(library, (field, value) => {
        if (field === 'library_name') ours = this.clientName(bulkPayload(value) ?? Buffer.alloc(0)) !== null;
        if (field === 'functions') count = (value[0] === 0x2a || value[0] === 0x7e ? splitAggregate(value)?.length : 0) ?? 0;
        return value;
      });
      if (ours) {
        libraries++;
        functions += count;
      }
    }
    return { libraries, functions };
  }

  /** The code, as the client loaded it, of each of the namespace's libraries in a FUNCTION LIST WITHCODE reply (FUNCTION DUMP). */
  libraryCodes(reply: Buffer): Buffer[] {
    const codes: Buffer[] = [];
    const libraries = reply[0] === 0x2a || reply[0] === 0x7e ? splitAggregate(reply) : null;
    for (const library of libraries ?? []) {
      let ours = false;
      let code: Buffer | null = null;
      this.changeFields(library, (field, value) => {
        if (field === 'library_name') ours = this.clientName(bulkPayload(value) ?? Buffer.alloc(0)) !== null;
        if (field === 'library_code') code = bulkPayload(value);
        return value;
      });
      if (ours && code !== null) codes.push(this.clientCode(code));
    }
    return codes;
  }

  /** The stored names of the namespace's libraries in a node's FUNCTION LIST reply (FUNCTION FLUSH deletes them). */
  storedLibraryNames(reply: Buffer): Buffer[] {
    const names: Buffer[] = [];
    const libraries = reply[0] === 0x2a || reply[0] === 0x7e ? splitAggregate(reply) : null;
    for (const library of libraries ?? []) {
      this.changeFields(library, (field, value) => {
        const name = field === 'library_name' ? bulkPayload(value) : null;
        if (name !== null && this.clientName(name) !== null) names.push(Buffer.from(name));
        return value;
      });
    }
    return names;
  }

  private clientFunctions(list: Buffer): Buffer {
    const functions = list[0] === 0x2a || list[0] === 0x7e ? splitAggregate(list) : null;
    if (functions === null) return list;
    const renamed = functions.map((fn) =>
      this.changeFields(fn, (field, value) => {
        if (field !== 'name') return value;
        const name = bulkPayload(value);
        const client = name === null ? null : this.clientName(name);
        return client === null ? value : encodeBulk(client, 2);
      }),
    );
    return Buffer.concat([Buffer.from(`${String.fromCharCode(list[0]!)}${renamed.length}\r\n`, 'latin1'), ...renamed]);
  }

  /** A field/value aggregate (RESP2 array, RESP3 map) with each value changed. */
  private changeFields(entry: Buffer, change: (field: string, value: Buffer) => Buffer): Buffer {
    const parts = entry[0] === 0x2a || entry[0] === 0x25 ? splitAggregate(entry) : null;
    if (parts === null) return entry;
    const out = [...parts];
    for (let i = 0; i + 1 < parts.length; i += 2) {
      const field = bulkPayload(parts[i]!)?.toString('latin1') ?? '';
      out[i + 1] = change(field, parts[i + 1]!);
    }
    const count = entry[0] === 0x25 ? out.length / 2 : out.length;
    return Buffer.concat([Buffer.from(`${String.fromCharCode(entry[0]!)}${count}\r\n`, 'latin1'), ...out]);
  }
}

/** The library name on a library's first line: `#!lua name=lib`. */
const SHEBANG_NAME = /^(#![^\n]*?\bname=)([A-Za-z0-9_]+)/;
/** A name the code registers: `register_function('f'`, `register_function("f"`, `function_name = 'f'`. */
const REGISTERED_NAME = /(register_function\s*\(\s*|function_name\s*=\s*)(['"])([A-Za-z0-9_]+)\2/g;
