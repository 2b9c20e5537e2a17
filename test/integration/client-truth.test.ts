import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { encodeCommand, parseInfo, rawCall, RawClient, ReplyError, type RespArg, type RespReply } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

// What respool answers about its own clients, item by item against one valkey-server answering
// the same commands (issue 22, "true answers"): CLIENT PAUSE WRITE, CLIENT SETINFO, RESET,
// CLIENT LIST / INFO fields, MONITOR, per-node CONFIG settings.
let server: ValkeyNode;
let proxy: RespoolProxy;
const open: RawClient[] = [];

beforeAll(async () => {
  server = await startStandalone();
  proxy = await startTestProxy([{ host: server.host, port: server.port }]);
});

afterAll(async () => {
  await proxy?.close();
  await server?.stop();
});

afterEach(async () => {
  for (const c of open.splice(0)) c.close();
  await rawCall(server.port, ['CLIENT', 'UNPAUSE']);
  await rawCall(proxy.address.port, ['CLIENT', 'UNPAUSE']);
  await waitFor(async () => proxy.clientCount() === 0, 'every client to be gone');
});

async function client(port: number): Promise<RawClient> {
  const c = await RawClient.connect(port);
  open.push(c);
  return c;
}

const text = (r: RespReply) => (r instanceof ReplyError ? `ERR:${r.message}` : r);

describe('CLIENT PAUSE WRITE holds what Valkey 8.0.1 holds', () => {
  // Valkey's processCommand: WRITE pauses hold commands flagged write or may-replicate (PFCOUNT,
  // PUBLISH, SPUBLISH, EVAL, EVALSHA, FCALL: a flag COMMAND does not show); a script's shebang
  // flags replace EVAL's.
  const commands: RespArg[][] = [
    ['GET', 'tr:k'],
    ['SET', 'tr:k', 'v'],
    ['PFCOUNT', 'tr:hll'],
    ['PFADD', 'tr:hll', 'a'],
    ['PUBLISH', 'tr:ch', 'x'],
    ['SPUBLISH', 'tr:ch', 'x'],
    ['EVAL', 'return 1', '0'],
    ['EVAL', '#!lua flags=no-writes\nreturn 1', '0'],
    ['EVAL', '#!lua\nreturn 1', '0'],
    ['EVAL_RO', 'return 1', '0'],
    ['EVALSHA', 'e0e1f9fabfc9d4800c877a703b823ac0578ff8db', '0'],
    ['PING'],
    ['EXPIRE', 'tr:nokey', '10'],
    ['SCRIPT', 'LOAD', 'return 1'],
  ];

  /** Which of `commands` a WRITE pause at `port` holds (answered after the pause, not before), and INFO's blocked_clients meanwhile. */
  async function heldUnderPause(port: number): Promise<{ held: string[]; blocked: number }> {
    const pauser = await client(port);
    const clients = await Promise.all(commands.map(() => client(port)));
    // Wide margins for a loaded machine: held ones answer at ~1500 ms, the others at once (the line
    // is at 1000 ms); blocked_clients is read at 500 ms, well after every command arrived and well
    // before the pause ends.
    expect(await pauser.call('CLIENT', 'PAUSE', '1500', 'WRITE')).toBe('OK');
    const started = Date.now();
    const times = commands.map((cmd, i) => clients[i]!.call(...cmd).then(() => Date.now() - started));
    await sleep(500);
    const blocked = Number(parseInfo(await pauser.call('INFO', 'clients'))['blocked_clients']);
    const elapsed = await Promise.all(times);
    return { held: commands.filter((_, i) => elapsed[i]! >= 1000).map((c) => c.slice(0, 2).join(' ')), blocked };
  }

  it('the same commands are held as by one server, and each held client counts as blocked in INFO clients', async () => {
    await rawCall(server.port, ['SCRIPT', 'LOAD', 'return 1']); // EVALSHA's script, known to both
    await rawCall(proxy.address.port, ['SCRIPT', 'LOAD', 'return 1']);
    const direct = await heldUnderPause(server.port);
    await rawCall(server.port, ['CLIENT', 'UNPAUSE']);
    const through = await heldUnderPause(proxy.address.port);
    expect(direct.held).toContain('PFCOUNT tr:hll');
    expect(direct.held).toContain('PUBLISH tr:ch');
    expect(through.held).toEqual(direct.held);
    expect(direct.blocked).toBe(direct.held.length);
    expect(through.blocked).toBe(through.held.length);
  });
});

describe('CLIENT SETINFO and RESET', () => {
  it('SETINFO refuses what Valkey refuses, with its error, and accepts the rest', async () => {
    const cases: RespArg[][] = [
      ['CLIENT', 'SETINFO', 'lib-name', 'valkey py'],
      ['CLIENT', 'SETINFO', 'lib-name', 'a\nb'],
      ['CLIENT', 'SETINFO', 'lib-ver', '1.0 beta'],
      ['CLIENT', 'SETINFO', 'lib-ver', 'caf\u00e9'],
      ['CLIENT', 'SETINFO', 'lib-name', 'redis-py(valkey_v1)'],
      ['CLIENT', 'SETINFO', 'lib-name', ''],
      ['CLIENT', 'SETINFO', 'LIB-VER', '5.0.1'],
      ['CLIENT', 'SETINFO', 'lib-color', 'red'],
      ['CLIENT', 'SETINFO', 'lib-name'],
    ];
    for (const args of cases) {
      const direct = text(await rawCall(server.port, args));
      const through = text(await rawCall(proxy.address.port, args));
      expect(through, args.join(' ')).toEqual(direct);
    }
  });

  it('RESET keeps lib-name and lib-ver and drops the name, as Valkey', async () => {
    const lineAfterReset = async (port: number) => {
      const c = await client(port);
      await c.call('CLIENT', 'SETINFO', 'lib-name', 'mylib');
      await c.call('CLIENT', 'SETINFO', 'lib-ver', '1.2');
      await c.call('CLIENT', 'SETNAME', 'me');
      await c.call('HELLO', '3');
      expect(await c.call('RESET')).toBe('RESET');
      return String(await c.call('CLIENT', 'INFO'));
    };
    const pick = (line: string) => ['name', 'lib-name', 'lib-ver', 'resp'].map((k) => line.match(new RegExp(` ${k}=(\\S*)`))?.[1]);
    const direct = pick(await lineAfterReset(server.port));
    expect(direct).toEqual(['', 'mylib', '1.2', '2']);
    expect(pick(await lineAfterReset(proxy.address.port))).toEqual(direct);
  });
});

describe('CLIENT LIST / INFO fields are measured', () => {
  const field = (line: string, key: string) => line.match(new RegExp(`(?:^| )${key}=(\\S*)`))?.[1];
  /** The CLIENT LIST line of the client with this id, as `viewer` sees it. */
  const lineOf = async (viewer: RawClient, id: RespReply) => String(await viewer.call('CLIENT', 'LIST', 'ID', String(id))).trim();
  const num = (line: string, key: string) => Number(field(line, key));

  it('qbuf is the bytes of a request not yet complete, as one server counts them', async () => {
    const partialOf = async (port: number) => {
      const viewer = await client(port);
      const writer = await client(port);
      const id = await writer.call('CLIENT', 'ID');
      const value = 'x'.repeat(20_000);
      const whole = Buffer.from(`*3\r\n$3\r\nSET\r\n$6\r\ntr:big\r\n$${value.length}\r\n${value}\r\n`);
      writer.socket.write(whole.subarray(0, 5000));
      let qbuf = 0;
      await waitFor(async () => (qbuf = num(await lineOf(viewer, id), 'qbuf')) > 4900, 'the partial request to be read', 2000);
      writer.socket.write(whole.subarray(5000));
      await waitFor(async () => num(await lineOf(viewer, id), 'qbuf') === 0, 'the request to complete', 2000);
      return qbuf;
    };
    // Valkey moves the arguments it has parsed (SET, the key) out of its query buffer; respool
    // keeps a partial request whole until it is complete.
    expect(await partialOf(server.port)).toBe(5000 - 33);
    expect(await partialOf(proxy.address.port)).toBe(5000);
  });

  it('argv-mem: the arguments of the command running (CLIENT INFO itself, a blocked BLPOP), 0 once done', async () => {
    const argvOf = async (port: number) => {
      const self = num(String(await rawCall(port, ['CLIENT', 'INFO'])), 'argv-mem');
      const viewer = await client(port);
      const blocked = await client(port);
      const id = await blocked.call('CLIENT', 'ID');
      const pop = blocked.call('BLPOP', 'tr:list', '0');
      await waitFor(async () => field(await lineOf(viewer, id), 'flags') === 'b', 'the BLPOP to block');
      const whileBlocked = num(await lineOf(viewer, id), 'argv-mem');
      await viewer.call('LPUSH', 'tr:list', 'a');
      await pop;
      return { self, whileBlocked, after: num(await lineOf(viewer, id), 'argv-mem') };
    };
    const direct = await argvOf(server.port);
    expect(direct).toEqual({ self: 10, whileBlocked: 5 + 7 + 1, after: 0 });
    expect(await argvOf(proxy.address.port)).toEqual(direct);
  });

  it('tot-cmds, tot-net-in and tot-net-out of a client blocked in BLPOP move as one server\'s do once it is served', async () => {
    const countersOf = async (port: number) => {
      const viewer = await client(port);
      const blocked = await client(port);
      const id = await blocked.call('CLIENT', 'ID');
      await blocked.call('SET', 'tr:c', 'v');
      const pop = blocked.call('BLPOP', 'tr:list2', '0');
      await waitFor(async () => field(await lineOf(viewer, id), 'flags') === 'b', 'the BLPOP to block');
      // The reply bytes less CLIENT ID's own (its id has as many digits as it has).
      const idReply = `:${String(id)}\r\n`.length;
      const pick = (line: string) => [num(line, 'tot-cmds'), num(line, 'tot-net-in'), num(line, 'tot-net-out') - idReply, field(line, 'cmd')];
      const during = pick(await lineOf(viewer, id));
      await viewer.call('LPUSH', 'tr:list2', 'abc');
      expect(await pop).toEqual(['tr:list2', 'abc']);
      const after = pick(await lineOf(viewer, id));
      return { during, after };
    };
    const sent = [['CLIENT', 'ID'], ['SET', 'tr:c', 'v'], ['BLPOP', 'tr:list2', '0']].reduce((n, c) => n + encodeCommand(c).length, 0);
    const direct = await countersOf(server.port);
    // While blocked: CLIENT ID and SET counted and answered, the BLPOP read but not counted.
    expect(direct.during).toEqual([2, sent, '+OK\r\n'.length, 'blpop']);
    expect(direct.after).toEqual([3, sent, 5 + '*2\r\n$8\r\ntr:list2\r\n$3\r\nabc\r\n'.length, 'blpop']);
    expect(await countersOf(proxy.address.port)).toEqual(direct);
  });

  it('multi-mem grows with the commands queued in MULTI and is 0 outside; omem and events show a client that does not read', async () => {
    const viewer = await client(proxy.address.port);
    const directViewer = await client(server.port);
    for (const [port, v] of [[server.port, directViewer], [proxy.address.port, viewer]] as const) {
      const tx = await client(port);
      const id = await tx.call('CLIENT', 'ID');
      expect(num(await lineOf(v, id), 'multi-mem')).toBe(0);
      await tx.call('MULTI');
      await tx.call('SET', 'tr:m', 'x'.repeat(1000));
      expect(num(await lineOf(v, id), 'multi-mem'), `port ${port}`).toBeGreaterThan(1000);
      await tx.call('EXEC');
      expect(num(await lineOf(v, id), 'multi-mem')).toBe(0);
    }
    await rawCall(server.port, ['SET', 'tr:huge', 'y'.repeat(8 * 1024 * 1024)]);
    for (const [port, v] of [[server.port, directViewer], [proxy.address.port, viewer]] as const) {
      const slow = await client(port);
      const id = await slow.call('CLIENT', 'ID');
      slow.socket.pause(); // reads nothing more: the 8 MiB reply stays with the server (or respool)
      void slow.call('GET', 'tr:huge').catch(() => {});
      let line = '';
      await waitFor(async () => num((line = await lineOf(v, id)), 'omem') > 1024 * 1024, `port ${port}: the unread reply in omem`, 5000);
      if (port === proxy.address.port) expect(field(line, 'events')).toBe('w'); // reading paused past half the output bound, output waiting
      expect(num(line, 'tot-mem')).toBeGreaterThanOrEqual(num(line, 'omem'));
      if (port === proxy.address.port) expect(Number(parseInfo(await v.call('INFO', 'clients'))['client_recent_max_output_buffer'])).toBeGreaterThan(1024 * 1024); // Valkey's is a peak its cron samples
      slow.socket.resume();
    }
  });
});

describe('MONITOR', () => {
  it('shows the same lines as one server for the same commands: case kept, secrets redacted, rejected and admin commands left out, MULTI … EXEC in run order', async () => {
    const session: RespArg[][] = [
      ['set', 'tr:mon', 'v'],
      ['AUTH', 'nobody', 'secret'],
      ['CONFIG', 'GET', 'maxmemory'],
      ['CLIENT', 'SETNAME', 'watched'],
      ['NOSUCHCOMMAND', 'x'],
      ['GET'],
      ['ECHO', 'a"b\n\u0001\u00e9'],
      ['EVAL', 'return 1', '0'],
      ['multi'],
      ['Set', 'tr:mon', 'v2'],
      ['LPUSH', 'tr:mon', 'x'],
      ['exec'],
      ['MULTI'],
      ['GET', 'tr:mon', 'extra'],
      ['EXEC'],
      ['DEL', 'tr:mon'],
    ];
    const linesFrom = async (port: number) => {
      const monitor = await client(port);
      expect(await monitor.call('MONITOR')).toBe('OK');
      expect(await monitor.call('GET', 'tr:mon')).toEqual(new ReplyError("ERR Replica can't interact with the keyspace"));
      const c = await client(port);
      for (const cmd of session) await c.call(...cmd);
      const addr = `${c.socket.localAddress}:${c.socket.localPort}`;
      await waitFor(() => monitor.unsolicited.some((l) => String(l).includes('"DEL"')), 'the last line');
      const lines = monitor.unsolicited.map(String);
      for (const l of lines) expect(l).toMatch(new RegExp(`^\\d+\\.\\d{6} \\[0 ${addr.replace(/\./g, '\\.')}\\] `));
      expect(await monitor.call('PING')).toBe('PONG'); // its own line comes after its reply
      await waitFor(() => monitor.unsolicited.length === lines.length + 1, 'its own PING line');
      monitor.socket.write(encodeCommand(['MONITOR'])); // a second MONITOR: no reply at all
      expect(await monitor.call('ECHO', 'next')).toBe('next');
      expect(await monitor.call('RESET')).toBe('RESET');
      await c.call('SET', 'tr:mon', 'after');
      await sleep(50);
      return { shown: monitor.unsolicited.map(String).map((l) => l.slice(l.indexOf(']') + 2)) };
    };
    const direct = await linesFrom(server.port);
    expect(direct.shown).toContain('"AUTH" "(redacted)" "(redacted)"');
    expect(direct.shown.slice(-3)).toEqual(['"DEL" "tr:mon"', '"PING"', '"ECHO" "next"']); // its RESET ends it: not even RESET's own line
    expect(await linesFrom(proxy.address.port)).toEqual(direct);
  });
});

describe('per-node CONFIG settings', () => {
  const asPairs = (r: RespReply): Record<string, string> => {
    const out: Record<string, string> = {};
    const flat = r instanceof Map ? [...r].flat() : (r as RespReply[]);
    for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = String(flat[i + 1]);
    return out;
  };

  it('CONFIG GET port / bind / tls-port answer respool\'s own; a node\'s own (dir, logfile, …) is refused with a reason', async () => {
    const direct = asPairs(await rawCall(server.port, ['CONFIG', 'GET', 'port']));
    expect(direct).toEqual({ port: String(server.port) });
    const through = await client(proxy.address.port);
    expect(asPairs(await through.call('CONFIG', 'GET', 'port'))).toEqual({ port: String(proxy.address.port) });
    expect(asPairs(await through.call('CONFIG', 'GET', 'PORT', 'bind', 'maxmemory-policy'))).toEqual({
      PORT: String(proxy.address.port), // spelt as asked, as Valkey answers
      bind: '127.0.0.1', 'maxmemory-policy': asPairs(await rawCall(server.port, ['CONFIG', 'GET', 'maxmemory-policy']))['maxmemory-policy'],
    });
    const refused = await through.call('CONFIG', 'GET', 'dir');
    expect(refused).toBeInstanceOf(ReplyError);
    expect((refused as ReplyError).message).toMatch(/^ERR respool: CONFIG GET dir is not supported through respool: it is a setting of each node/);
    // a pattern: the node's answer without the per-node settings, with respool's own
    const all = asPairs(await through.call('CONFIG', 'GET', '*'));
    const directAll = asPairs(await rawCall(server.port, ['CONFIG', 'GET', '*']));
    expect(all['port']).toBe(String(proxy.address.port));
    for (const gone of ['dir', 'logfile', 'pidfile', 'dbfilename', 'cluster-announce-port', 'replica-announce-ip']) {
      expect(directAll[gone], gone).toBeDefined();
      expect(all[gone], gone).toBeUndefined();
    }
    expect(all['maxmemory-policy']).toBe(directAll['maxmemory-policy']);
    expect(Object.keys(all).length).toBeGreaterThan(150);
    const ports = asPairs(await through.call('CONFIG', 'GET', '*port'));
    expect(ports).toEqual({ port: String(proxy.address.port), 'tls-port': '0' });
  });

  it('CONFIG SET of a per-node setting is refused whole: nothing is applied on the node, not even the other settings', async () => {
    const before = asPairs(await rawCall(server.port, ['CONFIG', 'GET', 'maxmemory-policy', 'port', 'dir']));
    for (const args of [
      ['CONFIG', 'SET', 'port', '1234'],
      ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru', 'dir', '/tmp'],
      ['CONFIG', 'SET', 'slaveof', 'no one'],
    ]) {
      const reply = await rawCall(proxy.address.port, args);
      expect(reply, args.join(' ')).toBeInstanceOf(ReplyError);
      expect((reply as ReplyError).message).toMatch(/^ERR respool: CONFIG SET (port|dir|slaveof) is not supported through respool: /);
    }
    expect(asPairs(await rawCall(server.port, ['CONFIG', 'GET', 'maxmemory-policy', 'port', 'dir']))).toEqual(before);
    // settings of the whole data set still reach the node
    expect(await rawCall(proxy.address.port, ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'])).toBe('OK');
    expect(asPairs(await rawCall(server.port, ['CONFIG', 'GET', 'maxmemory-policy']))['maxmemory-policy']).toBe('allkeys-lru');
    await rawCall(server.port, ['CONFIG', 'SET', 'maxmemory-policy', before['maxmemory-policy']!]);
  });
});
