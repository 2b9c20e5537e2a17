import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { rawPipeline } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { rawExchange } from '../helpers/raw-resp.js';

describe('replies of any depth', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    server = await startStandalone();
    // one shared link: the deep reply and the other client's commands travel on the same socket
    proxy = await startTestProxy([{ host: server.host, port: server.port }], { connectionsPerNode: 1 });
  });

  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
  });

  it("a script's recursive reply reaches its client whole; other clients on the link keep their requests", async () => {
    const script = 'local a = {}; local b = {a}; a[1] = b; return a';
    const complete = (bytes: string) => bytes.includes('-ERR reached lua stack limit');
    const others = rawPipeline(proxy.address.port, Array.from({ length: 200 }, (_, i) => ['ECHO', `m${i}`]));
    const sets = rawPipeline(proxy.address.port, Array.from({ length: 200 }, (_, i) => ['SET', `deep:${i}`, `v${i}`]));
    const [direct, through] = await Promise.all([
      rawExchange(server.port, [['EVAL', script, '0']], { until: complete }),
      rawExchange(proxy.address.port, [['EVAL', script, '0']], { until: complete }),
    ]);
    expect(through).toBe(direct);
    const depth = direct.split('*1\r\n').length - 1;
    expect(depth).toBeGreaterThan(128); // deeper than the old framer bound
    expect(await others).toEqual(Array.from({ length: 200 }, (_, i) => `m${i}`));
    expect(await sets).toEqual(Array.from({ length: 200 }, () => 'OK'));
    expect(await rawPipeline(proxy.address.port, [['GET', 'deep:199'], ['PING']])).toEqual(['v199', 'PONG']);
  });
});

describe('SCRIPT KILL / FUNCTION KILL reach the busy node', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    server = await startStandalone();
    await rawPipeline(server.port, [['CONFIG', 'SET', 'busy-reply-threshold', '100']]);
    // one shared link: the busy script sits on it, so the kill must travel on a connection of its own
    proxy = await startTestProxy([{ host: server.host, port: server.port }], { connectionsPerNode: 1, timeouts: { commandMs: 20_000 } });
  });

  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
  });

  it('SCRIPT KILL stops a looping script; NOTBUSY when none runs; the link then serves again', async () => {
    expect(String((await rawPipeline(proxy.address.port, [['SCRIPT', 'KILL']]))[0])).toMatch(/NOTBUSY No scripts in execution right now/);
    // answered only once killed, by the loop below that may take 10 s
    const looping = rawExchange(proxy.address.port, [['EVAL', 'while true do end', '0']], {
      until: (b) => b.startsWith('-') && b.endsWith('\r\n'),
      timeoutMs: 30_000,
    });
    let killed: unknown = null;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      killed = (await rawPipeline(proxy.address.port, [['SCRIPT', 'KILL']]))[0];
      if (killed === 'OK') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(killed).toBe('OK');
    expect(await looping).toMatch(/^-ERR Script killed by user with SCRIPT KILL/);
    expect(await rawPipeline(proxy.address.port, [['PING', 'x'], ['ECHO', 'after']])).toEqual(['x', 'after']);
  });
});
