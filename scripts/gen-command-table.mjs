#!/usr/bin/env node
// Generates src/commands/builtin-commands.json from a live valkey-server's `COMMAND` reply.
//
//   node scripts/gen-command-table.mjs [--server valkey-server] [--out src/commands/builtin-commands.json]
//
// A throwaway server is started on a free loopback port (no persistence), asked `COMMAND`
// (RESP2: nested arrays; key specs as flat key/value arrays) and `INFO server` (for the
// version stamp), then stopped. The output is sorted by command name (subcommands are their
// own entries, "client|setname") with one command per line, so diffs between Valkey versions
// stay readable. Key-spec notes are dropped (documentation only).

import { spawn } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};
const serverBin = opt('--server', 'valkey-server');
const outFile = path.resolve(root, opt('--out', 'src/commands/builtin-commands.json'));

// ---------------------------------------------------------------------------------------------
// Minimal RESP2 reader: parse(buf, pos) → [value, nextPos] or undefined when incomplete.
// Simple strings and bulk strings both become JS strings (COMMAND replies are ASCII).

class RespError {
  constructor(message) {
    this.message = message;
  }
}

function parse(buf, pos) {
  if (pos >= buf.length) return undefined;
  const eol = buf.indexOf('\r\n', pos);
  if (eol < 0) return undefined;
  const type = buf[pos];
  const line = buf.toString('latin1', pos + 1, eol);
  const after = eol + 2;
  switch (type) {
    case 0x2b: // +
      return [line, after];
    case 0x2d: // -
      return [new RespError(line), after];
    case 0x3a: // :
      return [Number(line), after];
    case 0x24: { // $
      const n = Number(line);
      if (n < 0) return [null, after];
      if (buf.length < after + n + 2) return undefined;
      return [buf.toString('utf8', after, after + n), after + n + 2];
    }
    case 0x2a: { // *
      const n = Number(line);
      if (n < 0) return [null, after];
      const out = [];
      let p = after;
      for (let i = 0; i < n; i++) {
        const r = parse(buf, p);
        if (r === undefined) return undefined;
        out.push(r[0]);
        p = r[1];
      }
      return [out, p];
    }
    default:
      throw new Error(`unexpected RESP type byte 0x${type.toString(16)}`);
  }
}

function encode(args) {
  let s = `*${args.length}\r\n`;
  for (const a of args) s += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
  return s;
}

function request(port, args) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let buf = Buffer.alloc(0);
    sock.on('connect', () => sock.write(encode(args)));
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const r = parse(buf, 0);
      if (r !== undefined) {
        sock.end();
        if (r[0] instanceof RespError) reject(new Error(r[0].message));
        else resolve(r[0]);
      }
    });
    sock.on('error', reject);
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitReady(port, child, deadlineMs) {
  const until = Date.now() + deadlineMs;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`valkey-server exited with code ${child.exitCode}`);
    try {
      if ((await request(port, ['PING'])) === 'PONG') return;
    } catch {
      /* not up yet */
    }
    if (Date.now() > until) throw new Error(`valkey-server on port ${port} did not answer PING`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function startServer() {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'respool-gen-'));
  const child = spawn(
    serverBin,
    ['--save', '', '--appendonly', 'no', '--port', String(port), '--bind', '127.0.0.1', '--daemonize', 'no', '--dir', dir],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const stop = async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitReady(port, child, 10_000);
  } catch (e) {
    await stop();
    throw e;
  }
  return { port, stop };
}

// ---------------------------------------------------------------------------------------------
// COMMAND reply → compact entries

function kv(flat) {
  // RESP2 map: [k1, v1, k2, v2, ...]
  const o = {};
  if (Array.isArray(flat)) for (let i = 0; i + 1 < flat.length; i += 2) o[flat[i]] = flat[i + 1];
  return o;
}

function convertKeySpec(raw) {
  const ks = kv(raw);
  const bs = kv(ks.begin_search);
  const bsSpec = kv(bs.spec);
  const fk = kv(ks.find_keys);
  const fkSpec = kv(fk.spec);
  let begin;
  if (bs.type === 'index') begin = { type: 'index', index: bsSpec.index };
  else if (bs.type === 'keyword') begin = { type: 'keyword', keyword: bsSpec.keyword, startfrom: bsSpec.startfrom };
  else begin = { type: 'unknown' };
  let find;
  if (fk.type === 'range') find = { type: 'range', lastkey: fkSpec.lastkey, keystep: fkSpec.keystep, limit: fkSpec.limit };
  else if (fk.type === 'keynum') find = { type: 'keynum', keynumidx: fkSpec.keynumidx, firstkey: fkSpec.firstkey, keystep: fkSpec.keystep };
  else find = { type: 'unknown' };
  return { flags: ks.flags ?? [], begin_search: begin, find_keys: find };
}

function convert(entry, out) {
  const [name, arity, flags, first, last, step, acl, tips, keySpecs, subs] = entry;
  out.push({
    name: String(name).toLowerCase(),
    arity,
    flags: flags ?? [],
    first,
    last,
    step,
    acl: acl ?? [],
    tips: tips ?? [],
    key_specs: (keySpecs ?? []).map(convertKeySpec),
  });
  for (const sub of subs ?? []) convert(sub, out);
}

function render(version, entries) {
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const lines = entries.map((e) => JSON.stringify(e));
  return (
    '{\n' +
    `"source": ${JSON.stringify(`valkey ${version} COMMAND (scripts/gen-command-table.mjs)`)},\n` +
    '"commands": [\n' +
    lines.join(',\n') +
    '\n]\n}\n'
  );
}

const server = await startServer();
try {
  const info = await request(server.port, ['INFO', 'server']);
  // Valkey reports redis_version:7.2.4 for compatibility; valkey_version is the real one.
  const version = (/valkey_version:([^\r\n]+)/.exec(info) ?? /redis_version:([^\r\n]+)/.exec(info))?.[1] ?? 'unknown';
  const reply = await request(server.port, ['COMMAND']);
  const entries = [];
  for (const e of reply) convert(e, entries);
  writeFileSync(outFile, render(version, entries));
  console.log(`wrote ${path.relative(root, outFile)}: ${entries.length} commands (valkey ${version})`);
} finally {
  await server.stop();
}
