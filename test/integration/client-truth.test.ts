import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { parseInfo, rawCall, RawClient, ReplyError, type RespArg, type RespReply } from '../harness/raw-client.js';
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
    expect(await pauser.call('CLIENT', 'PAUSE', '700', 'WRITE')).toBe('OK');
    const started = Date.now();
    const times = commands.map((cmd, i) => clients[i]!.call(...cmd).then(() => Date.now() - started));
    await sleep(300);
    const blocked = Number(parseInfo(await pauser.call('INFO', 'clients'))['blocked_clients']);
    const elapsed = await Promise.all(times);
    return { held: commands.filter((_, i) => elapsed[i]! >= 500).map((c) => c.slice(0, 2).join(' ')), blocked };
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
