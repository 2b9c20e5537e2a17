import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandFlag, KeySpecFlag } from '../../src/commands/command-flags.js';
import { CommandTable, type CommandSpec } from '../../src/commands/command-table.js';
import { NameIndex } from '../../src/commands/name-index.js';
import { RequestFramer } from '../../src/resp/request-framer.js';
import { encodeCommand } from '../../src/resp/encode.js';

const table = CommandTable.builtin();
const b = (...words: string[]): Buffer[] => words.map((w) => Buffer.from(w));

function keysOf(line: string[]): number[] {
  const args = b(...line);
  const spec = table.lookup(args);
  expect(spec, `lookup ${line.join(' ')}`).toBeDefined();
  return table.keyIndexes(spec!, args);
}

// ---------------------------------------------------------------------------------------------
// Built-in table: lookup and key positions

describe('CommandTable.lookupFrame', () => {
  it('finds what lookup(args) finds, from the request bytes, for every command and subcommand', () => {
    for (const name of table.names()) {
      const words = name.split('|').map((w, i) => (i === 0 ? w.toUpperCase() : w));
      const framer = new RequestFramer();
      framer.push(encodeCommand([...words, 'k']));
      const frame = framer.next()!;
      expect(table.lookupFrame(frame), name).toBe(table.lookup(words.concat('k').map((w) => Buffer.from(w))));
    }
    const unknown = new RequestFramer();
    unknown.push(encodeCommand(['NOSUCH', 'x']));
    expect(table.lookupFrame(unknown.next()!)).toBeUndefined();
  });
});

describe('CommandTable.builtin()', () => {
  it('is cached and complete', () => {
    expect(CommandTable.builtin()).toBe(table);
    expect(table.size).toBeGreaterThan(300);
    expect(table.source).toMatch(/^valkey 8\./);
    expect(table.names()).toContain('client|setname');
    expect(table.names()).toContain('get');
  });

  it('looks up names case-insensitively and resolves container commands', () => {
    for (const n of ['get', 'GET', 'Get', 'gEt']) expect(table.lookup(b(n, 'k'))?.name).toBe('get');
    expect(table.lookup(b('client', 'setname', 'x'))?.name).toBe('client|setname');
    expect(table.lookup(b('CLIENT', 'SETNAME', 'x'))?.name).toBe('client|setname');
    expect(table.lookup(b('Client', 'SetName', 'x'))?.name).toBe('client|setname');
    expect(table.lookup(b('config', 'get', 'maxmemory'))?.name).toBe('config|get');
    expect(table.lookup(b('OBJECT', 'encoding', 'k'))?.name).toBe('object|encoding');
    expect(table.lookup(b('xinfo', 'STREAM', 's'))?.name).toBe('xinfo|stream');
    expect(table.lookup(b('function', 'stats'))?.name).toBe('function|stats');
    expect(table.lookup(b('client', 'nosuchsub'))?.name).toBe('client');
    expect(table.lookup(b('client'))?.name).toBe('client');
    expect(table.lookup(b('nosuchcommand'))).toBeUndefined();
    expect(table.lookup(b('client|setname', 'x'))).toBeUndefined();
    expect(table.lookup([])).toBeUndefined();
    expect(table.lookup([Buffer.alloc(1000, 0x61)])).toBeUndefined();
    // a subcommand name is only looked up under its container
    expect(table.lookup(b('setname', 'x'))).toBeUndefined();
  });

  it('finds every command and subcommand in any letter case', () => {
    const mixed = (s: string) => [...s].map((c, i) => (i % 2 ? c.toUpperCase() : c)).join('');
    for (const name of table.names()) {
      const words = name.split('|');
      for (const spell of [(s: string) => s, (s: string) => s.toUpperCase(), mixed]) {
        const args = b(...words.map(spell), 'arg');
        expect(table.lookup(args)?.name, `${name} ${spell(name)}`).toBe(name);
      }
    }
  });

  it('NameIndex: growth, replacement, near misses', () => {
    const idx = new NameIndex<number>();
    for (let i = 0; i < 5000; i++) idx.set(`Name${i}`, i);
    idx.set('name7', -7);
    expect(idx.size).toBe(5000);
    for (let i = 0; i < 5000; i++) expect(idx.get(Buffer.from(`NAME${i}`))).toBe(i === 7 ? -7 : i);
    expect(idx.get(Buffer.from('name5000'))).toBeUndefined();
    expect(idx.get(Buffer.from('name'))).toBeUndefined();
    expect(idx.get(Buffer.from('name1\u0000'))).toBeUndefined();
    expect(idx.get(Buffer.alloc(0))).toBeUndefined();
    // '@' (0x40) and '[' (0x5b) sit next to the letters: no false case folding
    const j = new NameIndex<string>();
    j.set('a@', 'x');
    expect(j.get(Buffer.from('A@'))).toBe('x');
    expect(j.get(Buffer.from('a`'))).toBeUndefined();
    j.set('a[', 'y');
    expect(j.get(Buffer.from('a{'))).toBeUndefined();
  });

  it('exposes flags, tips, key specs and subcommands', () => {
    const get = table.get('get')!;
    expect(get.arity).toBe(2);
    expect(get.flags & CommandFlag.READONLY).toBeTruthy();
    expect(get.flags & CommandFlag.FAST).toBeTruthy();
    expect(get.flags & CommandFlag.WRITE).toBe(0);
    expect(get.keySpecs).toHaveLength(1);
    expect(get.keySpecs[0]!.write).toBe(false);
    expect(get.keySpecs[0]!.flags).toBe(KeySpecFlag.RO | KeySpecFlag.ACCESS);
    const set = table.get('SET')!;
    expect(set.flags & CommandFlag.WRITE).toBeTruthy();
    expect(set.keySpecs[0]!.write).toBe(true);
    expect(set.keySpecs[0]!.flags & KeySpecFlag.VARIABLE_FLAGS).toBeTruthy();
    expect(table.get('blpop')!.flags & CommandFlag.BLOCKING).toBeTruthy();
    expect(table.get('eval')!.flags & CommandFlag.MOVABLE_KEYS).toBeTruthy();
    expect(table.get('keys')!.tips).toContain('request_policy:all_shards');
    const client = table.get('client')!;
    expect(client.subcommands?.get('setname')?.name).toBe('client|setname');
    expect(client.subcommands?.get('setname')?.parent).toBe(client);
    const zus = table.get('zunionstore')!;
    expect(zus.keySpecs.map((k) => k.write)).toEqual([true, false]);
    expect(zus.keySpecs[1]!.findKeys).toEqual({ type: 'keynum', keyNumIdx: 0, firstKey: 1, keyStep: 1 });
    const tops = [...table.commands()];
    expect(tops.every((s) => !s.name.includes('|'))).toBe(true);
    expect(new Set(tops).size).toBe(tops.length);
  });

  it.each([
    [['GET', 'k'], [1]],
    [['SET', 'k', 'v'], [1]],
    [['SET', 'k', 'v', 'GET', 'EX', '10'], [1]],
    [['MSET', 'a', '1', 'b', '2', 'c', '3'], [1, 3, 5]],
    [['MSET', 'a', '1', 'b'], [1, 3]],
    [['MGET', 'a', 'b', 'c'], [1, 2, 3]],
    [['DEL', 'a'], [1]],
    [['DEL', 'a', 'b', 'c'], [1, 2, 3]],
    [['EVAL', 'return 1', '2', 'k1', 'k2', 'arg'], [3, 4]],
    [['EVAL', 'return 1', '0', 'arg'], []],
    [['EVAL', 'return 1', '3', 'k1'], []],
    [['EVAL', 'return 1', 'x', 'k1'], []],
    [['EVAL', 'return 1', '01', 'k1'], []],
    [['EVAL', 'return 1', '-1', 'k1'], []],
    [['EVALSHA', 'abc', '1', 'k1', 'a'], [3]],
    [['FCALL', 'f', '2', 'k1', 'k2'], [3, 4]],
    [['FCALL_RO', 'f', '1', 'k1', 'x'], [3]],
    [['XREAD', 'COUNT', '2', 'STREAMS', 's1', 's2', '0', '0'], [4, 5]],
    [['XREAD', 'BLOCK', '0', 'STREAMS', 's1', '$'], [4]],
    [['XREADGROUP', 'GROUP', 'streams', 'c', 'STREAMS', 's1', '>'], [5]],
    [['ZUNIONSTORE', 'd', '2', 'a', 'b', 'WEIGHTS', '1', '2'], [1, 3, 4]],
    [['ZUNIONSTORE', 'd', '0', 'a'], []],
    [['ZINTERCARD', '2', 'a', 'b', 'LIMIT', '1'], [2, 3]],
    [['LMPOP', '2', 'l1', 'l2', 'LEFT', 'COUNT', '2'], [2, 3]],
    [['ZMPOP', '1', 'z', 'MIN'], [2]],
    [['BLMPOP', '0', '2', 'l1', 'l2', 'RIGHT'], [3, 4]],
    [['BZMPOP', '1.5', '1', 'z', 'MAX'], [3]],
    [['GEORADIUS', 'g', '0', '0', '10', 'km'], [1]],
    [['GEORADIUS', 'g', '0', '0', '10', 'km', 'STORE', 'd'], [1, 7]],
    [['GEORADIUS', 'g', '0', '0', '10', 'km', 'COUNT', '3', 'STOREDIST', 'd'], [1, 9]],
    [['GEORADIUSBYMEMBER', 'g', 'm', '10', 'km', 'store', 'd'], [1, 6]],
    [['SORT', 'k'], [1]],
    [['SORT', 'k', 'BY', 'w_*', 'GET', 'o_*', 'STORE', 'd'], [1, 7]],
    [['SORT', 'k', 'LIMIT', '0', '10', 'STORE', 'd1', 'ALPHA', 'STORE', 'd2'], [1, 9]],
    [['SORT', 'k', 'GET', 'store', 'DESC'], [1]],
    [['SORT_RO', 'k', 'BY', 'w_*'], [1]],
    [['MIGRATE', 'h', '6379', 'k', '0', '1000'], [3]],
    [['MIGRATE', 'h', '6379', '', '0', '1000', 'KEYS', 'a', 'b'], [7, 8]],
    [['MIGRATE', 'h', '6379', '', '0', '1000', 'COPY', 'AUTH', 'keys', 'KEYS', 'a'], [10]],
    [['MIGRATE', 'h', '6379', '', '0', '1000', 'AUTH2', 'u', 'keys', 'KEYS', 'a', 'b'], [10, 11]],
    [['MIGRATE', 'h', '6379', 'k', '0', '1000', 'KEYS', 'a'], []],
    [['OBJECT', 'ENCODING', 'k'], [2]],
    [['object', 'freq', 'k'], [2]],
    [['OBJECT', 'HELP'], []],
    [['XINFO', 'STREAM', 's', 'FULL'], [2]],
    [['XINFO', 'CONSUMERS', 's', 'g'], [2]],
    [['MEMORY', 'USAGE', 'k', 'SAMPLES', '5'], [2]],
    [['BITOP', 'AND', 'd', 'a', 'b', 'c'], [2, 3, 4, 5]],
    [['BITOP', 'NOT', 'd', 'a'], [2, 3]],
    [['LCS', 'a', 'b', 'LEN'], [1, 2]],
    [['SINTERCARD', '2', 'a', 'b', 'LIMIT', '3'], [2, 3]],
    [['SINTERCARD', '3', 'a', 'b'], []],
    [['CLIENT', 'SETNAME', 'x'], []],
    [['PING'], []],
    [['SPUBLISH', 'ch', 'msg'], [1]], // shard channel: decides the slot (not a key for GETKEYS)
    [['PUBLISH', 'ch', 'msg'], []],
    [['GET'], []], // wrong arity: nothing out of bounds
    [['MGET'], []],
  ])('keyIndexes %j → %j', (line, expected) => {
    expect(keysOf(line)).toEqual(expected);
  });

  it('keyRefs carries per-spec flags', () => {
    const args = b('ZUNIONSTORE', 'd', '2', 'a', 'b');
    const refs = table.keyRefs(table.lookup(args)!, args);
    expect(refs.map((r) => r.index)).toEqual([1, 3, 4]);
    expect(refs[0]!.flags & KeySpecFlag.OW).toBeTruthy();
    expect(refs[1]!.flags).toBe(KeySpecFlag.RO | KeySpecFlag.ACCESS);
    const sortArgs = b('SORT', 'k', 'STORE', 'd');
    const sortRefs = table.keyRefs(table.lookup(sortArgs)!, sortArgs);
    expect(sortRefs).toEqual([
      { index: 1, flags: KeySpecFlag.RO | KeySpecFlag.ACCESS },
      { index: 3, flags: KeySpecFlag.OW | KeySpecFlag.UPDATE },
    ]);
  });

  it('falls back to the legacy first/last/step without key specs', () => {
    const spec: CommandSpec = {
      name: 'oldmset',
      arity: -3,
      flags: CommandFlag.WRITE,
      tips: [],
      keySpecs: [],
      legacyKeys: { first: 1, last: -1, step: 2 },
    };
    expect(table.keyIndexes(spec, b('oldmset', 'a', '1', 'b', '2'))).toEqual([1, 3]);
    const fixed: CommandSpec = { ...spec, name: 'oldcopy', legacyKeys: { first: 1, last: 2, step: 1 } };
    expect(table.keyIndexes(fixed, b('oldcopy', 'a', 'b', 'x'))).toEqual([1, 2]);
    expect(table.keyIndexes(fixed, b('oldcopy', 'a'))).toEqual([]);
    const none: CommandSpec = { ...spec, name: 'noop', legacyKeys: { first: 0, last: 0, step: 0 } };
    expect(table.keyIndexes(none, b('noop', 'a'))).toEqual([]);
  });

  it('uses partial results for unresolvable specs of unknown commands', () => {
    const base = table.get('sort')!;
    const spec: CommandSpec = { name: 'mod.sortlike', arity: -2, flags: 0, tips: [], keySpecs: base.keySpecs };
    expect(table.keyIndexes(spec, b('mod.sortlike', 'k', 'STORE', 'd'))).toEqual([1]);
  });
});

// ---------------------------------------------------------------------------------------------
// A real valkey-server: differential test against COMMAND GETKEYS, and fromCommandInfo()

class RespErr {
  constructor(readonly message: string) {}
}
type V = null | string | Buffer | number | boolean | RespErr | V[] | Map<V, V>;

/** RESP2/RESP3 reader producing RespValue-shaped values (bulk → Buffer, simple → string). */
function parse(buf: Buffer, pos: number): [V, number] | undefined {
  if (pos >= buf.length) return undefined;
  const eol = buf.indexOf('\r\n', pos);
  if (eol < 0) return undefined;
  const t = String.fromCharCode(buf[pos]!);
  const line = buf.toString('latin1', pos + 1, eol);
  const next = eol + 2;
  const aggregate = (n: number, p: number): [V[], number] | undefined => {
    const items: V[] = [];
    for (let i = 0; i < n; i++) {
      const r = parse(buf, p);
      if (r === undefined) return undefined;
      items.push(r[0]);
      p = r[1];
    }
    return [items, p];
  };
  switch (t) {
    case '+':
      return [line, next];
    case '-':
      return [new RespErr(line), next];
    case ':':
    case ',':
      return [Number(line), next];
    case '(':
      return [line, next];
    case '#':
      return [line === 't', next];
    case '_':
      return [null, next];
    case '$':
    case '=':
    case '!': {
      const n = Number(line);
      if (n < 0) return [null, next];
      if (buf.length < next + n + 2) return undefined;
      const body = buf.subarray(next, next + n);
      if (t === '!') return [new RespErr(body.toString()), next + n + 2];
      return [t === '=' ? body.subarray(4).toString() : Buffer.from(body), next + n + 2];
    }
    case '*':
    case '~':
    case '>': {
      const n = Number(line);
      if (n < 0) return [null, next];
      return aggregate(n, next);
    }
    case '%': {
      const r = aggregate(Number(line) * 2, next);
      if (r === undefined) return undefined;
      const m = new Map<V, V>();
      for (let i = 0; i < r[0].length; i += 2) {
        const k = r[0][i]!;
        m.set(Buffer.isBuffer(k) ? k.toString() : k, r[0][i + 1]!);
      }
      return [m, r[1]];
    }
    default:
      throw new Error(`bad RESP type ${t}`);
  }
}

class RawClient {
  private buf = Buffer.alloc(0);
  private waiters: Array<(v: V) => void> = [];
  private constructor(private readonly sock: net.Socket) {
    sock.on('data', (chunk) => {
      this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
      for (;;) {
        const r = parse(this.buf, 0);
        if (r === undefined) break;
        this.buf = this.buf.subarray(r[1]);
        this.waiters.shift()?.(r[0]);
      }
    });
  }
  static connect(port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => resolve(new RawClient(s)));
      s.once('error', reject);
    });
  }
  call(args: Array<string | Buffer>): Promise<V> {
    const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
    for (const a of args) {
      const bb = Buffer.isBuffer(a) ? a : Buffer.from(a);
      parts.push(Buffer.from(`$${bb.length}\r\n`), bb, Buffer.from('\r\n'));
    }
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.sock.write(Buffer.concat(parts));
    });
  }
  close(): void {
    this.sock.destroy();
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

describe('against a real valkey-server', () => {
  let child: ChildProcess | undefined;
  let dir = '';
  let port = 0;
  let client: RawClient;

  beforeAll(async () => {
    port = await freePort();
    dir = mkdtempSync(path.join(os.tmpdir(), 'respool-cmdtest-'));
    child = spawn('valkey-server', ['--save', '', '--appendonly', 'no', '--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'no', '--dir', dir], {
      stdio: 'ignore',
    });
    const until = Date.now() + 10_000;
    for (;;) {
      try {
        client = await RawClient.connect(port);
        if ((await client.call(['PING'])) === 'PONG') break;
        client.close();
      } catch {
        /* not up yet */
      }
      if (Date.now() > until) throw new Error('valkey-server did not start');
      await new Promise((r) => setTimeout(r, 50));
    }
  });

  afterAll(async () => {
    client?.close();
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const LINES: string[][] = [
    ['GET', 'k'],
    ['SET', 'k', 'v'],
    ['SET', 'k', 'v', 'GET'],
    ['SET', 'k', 'v', 'EX', '10', 'NX'],
    ['MSET', 'a', '1', 'b', '2', 'c', '3'],
    ['MSET', 'a', '1', 'b'],
    ['MGET', 'a', 'b', 'c'],
    ['DEL', 'a', 'b', 'c'],
    ['EXISTS', 'a', 'b'],
    ['UNLINK', 'a'],
    ['TOUCH', 'a', 'b'],
    ['EVAL', 'return 1', '2', 'k1', 'k2', 'a1'],
    ['EVAL', 'return 1', '0'],
    ['EVAL', 'return 1', '3', 'k1', 'k2'],
    ['EVAL', 'return 1', 'abc', 'k1'],
    ['EVALSHA', 'deadbeef', '1', 'k', 'a'],
    ['EVAL_RO', 'return 1', '1', 'k'],
    ['FCALL', 'f', '2', 'k1', 'k2', 'a'],
    ['FCALL_RO', 'f', '1', 'k'],
    ['XREAD', 'COUNT', '2', 'STREAMS', 's1', 's2', '0', '0'],
    ['XREAD', 'BLOCK', '0', 'STREAMS', 's', '0'],
    ['XREAD', 'STREAMS', 's1', 's2', 's3'],
    ['XREADGROUP', 'GROUP', 'g', 'c', 'COUNT', '1', 'STREAMS', 's1', 's2', '>', '>'],
    ['XADD', 's', '*', 'f', 'v'],
    ['XRANGE', 's', '-', '+'],
    ['ZUNIONSTORE', 'd', '2', 'a', 'b', 'WEIGHTS', '1', '2'],
    ['ZINTERSTORE', 'd', '3', 'a', 'b', 'c'],
    ['ZDIFFSTORE', 'd', '2', 'a', 'b'],
    ['ZUNIONSTORE', 'd', '0', 'a'],
    ['ZUNION', '2', 'a', 'b'],
    ['ZINTER', '2', 'a', 'b', 'WITHSCORES'],
    ['ZDIFF', '2', 'a', 'b'],
    ['ZINTERCARD', '2', 'a', 'b', 'LIMIT', '1'],
    ['LMPOP', '2', 'l1', 'l2', 'LEFT', 'COUNT', '2'],
    ['ZMPOP', '2', 'z1', 'z2', 'MIN'],
    ['BLMPOP', '0', '2', 'l1', 'l2', 'RIGHT'],
    ['BZMPOP', '1', '2', 'z1', 'z2', 'MAX'],
    ['BLPOP', 'a', 'b', '0'],
    ['BRPOPLPUSH', 'a', 'b', '0'],
    ['BLMOVE', 'a', 'b', 'LEFT', 'RIGHT', '0'],
    ['LMOVE', 'a', 'b', 'LEFT', 'RIGHT'],
    ['RPOPLPUSH', 'a', 'b'],
    ['GEORADIUS', 'g', '0', '0', '10', 'km'],
    ['GEORADIUS', 'g', '0', '0', '10', 'km', 'STORE', 'd'],
    ['GEORADIUS', 'g', '0', '0', '10', 'km', 'COUNT', '3', 'STOREDIST', 'd'],
    ['GEORADIUSBYMEMBER', 'g', 'm', '10', 'km', 'STORE', 'd'],
    ['GEOSEARCHSTORE', 'd', 's', 'FROMMEMBER', 'm', 'BYRADIUS', '1', 'km'],
    ['SORT', 'k'],
    ['SORT', 'k', 'BY', 'w_*', 'GET', 'o_*', 'STORE', 'd'],
    ['SORT', 'k', 'LIMIT', '0', '10', 'STORE', 'd1', 'ALPHA', 'STORE', 'd2'],
    ['SORT', 'k', 'GET', 'store', 'DESC'],
    ['SORT_RO', 'k', 'BY', 'x'],
    ['MIGRATE', 'h', '6379', 'k', '0', '1000'],
    ['MIGRATE', 'h', '6379', '', '0', '1000', 'KEYS', 'a', 'b', 'c'],
    ['MIGRATE', 'h', '6379', '', '0', '1000', 'COPY', 'REPLACE', 'AUTH', 'keys', 'KEYS', 'a', 'b'],
    ['MIGRATE', 'h', '6379', '', '0', '1000', 'AUTH2', 'u', 'p', 'KEYS', 'a'],
    ['OBJECT', 'ENCODING', 'k'],
    ['OBJECT', 'FREQ', 'k'],
    ['XINFO', 'STREAM', 's'],
    ['XINFO', 'GROUPS', 's'],
    ['XINFO', 'CONSUMERS', 's', 'g'],
    ['MEMORY', 'USAGE', 'k'],
    ['MEMORY', 'USAGE', 'k', 'SAMPLES', '5'],
    ['BITOP', 'AND', 'd', 'a', 'b', 'c'],
    ['BITOP', 'NOT', 'd', 'a'],
    ['LCS', 'a', 'b'],
    ['LCS', 'a', 'b', 'LEN'],
    ['SINTERCARD', '2', 'a', 'b', 'LIMIT', '3'],
    ['SINTERSTORE', 'd', 'a', 'b'],
    ['SDIFF', 'a', 'b', 'c'],
    ['SMOVE', 'a', 'b', 'm'],
    ['RENAME', 'a', 'b'],
    ['COPY', 'a', 'b', 'REPLACE'],
    ['HSET', 'h', 'f', 'v'],
    ['HGET', 'h', 'f'],
    ['INCR', 'c'],
    ['EXPIRE', 'k', '10'],
    ['PFMERGE', 'd', 'a', 'b'],
    ['PFCOUNT', 'a', 'b'],
    ['BITFIELD', 'k', 'GET', 'u8', '0'],
    ['BITFIELD_RO', 'k', 'GET', 'u8', '0'],
    ['SETRANGE', 'k', '0', 'v'],
    ['GETEX', 'k', 'PX', '5'],
    ['ZRANGESTORE', 'd', 'src', '0', '-1'],
    ['DUMP', 'k'],
    ['RESTORE', 'k', '0', 'payload'],
    ['OBJECT', 'HELP'],
    ['CLIENT', 'SETNAME', 'x'],
    ['PING'],
    ['INFO'],
    ['KEYS', '*'],
    ['DBSIZE'],
    ['WAIT', '0', '0'],
    ['PUBLISH', 'ch', 'm'],
  ];

  it(`keyIndexes matches COMMAND GETKEYS for ${LINES.length} command lines`, async () => {
    const mismatches: string[] = [];
    for (const line of LINES) {
      const reply = await client.call(['COMMAND', 'GETKEYS', ...line]);
      const server = Array.isArray(reply) ? reply.map((v) => (Buffer.isBuffer(v) ? v.toString() : String(v))) : [];
      const args = b(...line);
      const spec = table.lookup(args);
      const ours = spec ? table.keyIndexes(spec, args).map((i) => line[i]!) : ['<no spec>'];
      if (JSON.stringify(ours) !== JSON.stringify(server)) {
        mismatches.push(`${line.join(' ')}: ours ${JSON.stringify(ours)} server ${JSON.stringify(server)}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('keyIndexes matches COMMAND GETKEYS for every command at its minimal arity', async () => {
    // Every command and subcommand, with distinct filler arguments ("x1", "x2", ...) up to its
    // arity (or one more for "at least N"); numkeys positions get "2". Checks the positions of
    // every fixed-index key spec in the table. Known deviation: shard channels (SPUBLISH ...).
    const mismatches: string[] = [];
    let compared = 0;
    let withKeys = 0;
    for (const name of table.names()) {
      const spec = table.get(name)!;
      if (spec.subcommands !== undefined) continue;
      if (spec.keySpecs.some((k) => k.flags & KeySpecFlag.NOT_KEY)) continue;
      const words = name.split('|');
      const total = Math.max(Math.abs(spec.arity), words.length) + (spec.arity < 0 ? 1 : 0);
      const line = [...words];
      for (let i = line.length; i < total + 2; i++) line.push(`x${i}`);
      for (const k of spec.keySpecs) {
        if (k.findKeys.type === 'keynum' && k.beginSearch.type === 'index') line[k.beginSearch.index + k.findKeys.keyNumIdx] = '2';
      }
      const fitted = spec.arity > 0 ? line.slice(0, spec.arity) : line;
      const reply = await client.call(['COMMAND', 'GETKEYS', ...fitted]);
      const server = Array.isArray(reply) ? reply.map((v) => (Buffer.isBuffer(v) ? v.toString() : String(v))) : [];
      const args = b(...fitted);
      const found = table.lookup(args);
      const ours = found ? table.keyIndexes(found, args).map((i) => fitted[i]!) : ['<no spec>'];
      compared++;
      if (server.length > 0) withKeys++;
      if (JSON.stringify(ours) !== JSON.stringify(server)) {
        mismatches.push(`${fitted.join(' ')}: ours ${JSON.stringify(ours)} server ${JSON.stringify(server)}`);
      }
    }
    expect(compared).toBeGreaterThan(300);
    expect(withKeys).toBeGreaterThan(180);
    expect(mismatches).toEqual([]);
  });

  it('SPUBLISH: the shard channel is returned although GETKEYS has no keys', async () => {
    const reply = await client.call(['COMMAND', 'GETKEYS', 'SPUBLISH', 'ch', 'm']);
    expect(reply).toBeInstanceOf(RespErr);
    expect(keysOf(['SPUBLISH', 'ch', 'm'])).toEqual([1]);
  });

  it('PFMERGE with no source: destkey is its key although GETKEYS finds none (it creates destkey)', async () => {
    expect(await client.call(['COMMAND', 'GETKEYS', 'PFMERGE', 'dest'])).toBeInstanceOf(RespErr);
    expect(keysOf(['PFMERGE', 'dest'])).toEqual([1]);
    expect(keysOf(['PFMERGE', 'dest', 's1', 's2'])).toEqual([1, 2, 3]);
  });

  function project(s: CommandSpec) {
    return {
      name: s.name,
      arity: s.arity,
      flags: s.flags,
      flagNames: s.flagNames,
      acl: s.aclCategories,
      tips: s.tips,
      keySpecs: s.keySpecs,
      legacy: s.legacyKeys,
      subs: s.subcommands ? [...s.subcommands.keys()].sort() : undefined,
      parent: s.parent?.name,
    };
  }

  async function compareWithBuiltin(live: CommandTable) {
    expect(live.names()).toEqual(table.names());
    for (const name of table.names()) {
      expect(project(live.get(name)!), name).toEqual(project(table.get(name)!));
    }
    // and the compiled finders agree on a few lines
    for (const line of LINES) {
      const args = b(...line);
      expect(live.keyIndexes(live.lookup(args)!, args), line.join(' ')).toEqual(table.keyIndexes(table.lookup(args)!, args));
    }
  }

  it('fromCommandInfo(COMMAND reply, RESP2) equals builtin()', async () => {
    const reply = await client.call(['COMMAND']);
    const live = CommandTable.fromCommandInfo(reply as never);
    expect(live.source).toBe('COMMAND reply');
    await compareWithBuiltin(live);
  });

  it('fromCommandInfo(COMMAND reply, RESP3 maps and sets) equals builtin()', async () => {
    const c3 = await RawClient.connect(port);
    try {
      const hello = await c3.call(['HELLO', '3']);
      expect(hello).toBeInstanceOf(Map);
      const reply = await c3.call(['COMMAND']);
      const live = CommandTable.fromCommandInfo(reply as never);
      await compareWithBuiltin(live);
    } finally {
      c3.close();
    }
  });

  it('fromCommandInfo(COMMAND INFO ...) skips unknown names and keeps subcommands', async () => {
    const reply = await client.call(['COMMAND', 'INFO', 'get', 'nosuchcommand', 'client']);
    const live = CommandTable.fromCommandInfo(reply as never);
    expect(live.names()).toContain('get');
    expect(live.names()).toContain('client|setname');
    expect(live.lookup(b('client', 'setname', 'x'))?.name).toBe('client|setname');
    expect(live.lookup(b('set', 'k', 'v'))).toBeUndefined();
  });

  it('fromCommandInfo borrows built-in key specs when the server reports none (Redis 6 shape)', () => {
    const entry = (name: string, arity: number, first: number, last: number, step: number) => [
      Buffer.from(name),
      arity,
      ['write', 'movablekeys'],
      first,
      last,
      step,
    ];
    const live = CommandTable.fromCommandInfo([entry('eval', -3, 0, 0, 0), entry('mset', -3, 1, -1, 2), entry('oldcmd', -2, 1, 1, 1)]);
    expect(live.keyIndexes(live.get('eval')!, b('EVAL', 's', '1', 'k'))).toEqual([3]);
    expect(live.keyIndexes(live.get('mset')!, b('MSET', 'a', '1', 'b', '2'))).toEqual([1, 3]);
    expect(live.keyIndexes(live.get('oldcmd')!, b('oldcmd', 'k', 'x'))).toEqual([1]);
    expect(() => CommandTable.fromCommandInfo('nope')).toThrow(TypeError);
  });
});
