import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Valkey } from 'iovalkey';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { rawCall, type RespReply } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { exerciseDataTypes } from '../helpers/data-types.js';

const run = promisify(execFile);

describe('respool in front of a standalone valkey-server', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;
  let client: Valkey;

  beforeAll(async () => {
    server = await startStandalone();
    proxy = await startTestProxy([{ host: server.host, port: server.port }]);
    client = clientFor(proxy);
  });

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await server?.stop();
  });

  it('detects standalone mode and answers PING locally', async () => {
    expect(proxy.refresher.current?.mode).toBe('standalone');
    expect(await client.ping()).toBe('PONG');
    expect(await client.echo('hi')).toBe('hi');
  });

  it("reports the upstream's version in HELLO as the upstream does (read once by discovery)", async () => {
    // Valkey's HELLO says valkey_version (8.0.1), not the redis_version:7.2.4 its INFO prints first.
    const direct = (await rawCall(server.port, ['HELLO', '2'])) as RespReply[];
    const version = String(direct[direct.findIndex((x) => String(x) === 'version') + 1]);
    expect(version).toMatch(/^[89]\./);
    const hello = (await client.call('HELLO', '2')) as string[];
    expect(hello[hello.indexOf('version') + 1]).toBe(version);
    const info = await client.info('server');
    expect(info).toMatch(new RegExp(`^valkey_version:${version.replace(/\./g, '\\.')}\r?$`, 'm'));
  });

  it('serves single-key commands of every data type', async () => {
    await exerciseDataTypes(client, 'standalone');
  });

  it('forwards keyless commands and the server errors untouched', async () => {
    expect(await client.dbsize()).toBeGreaterThan(0);
    await expect(client.call('NOSUCHCOMMAND', 'x')).rejects.toThrow(/unknown command/);
    await expect(client.call('GET')).rejects.toThrow(/wrong number of arguments/);
  });

  it('keeps reply order over a pipeline of 1,000 mixed commands', async () => {
    const pipeline = client.pipeline();
    for (let i = 0; i < 1000; i++) {
      if (i % 3 === 0) pipeline.set(`p:${i}`, `v${i}`);
      else if (i % 3 === 1) pipeline.ping(`m${i}`);
      else pipeline.get(`p:${i - 2}`);
    }
    const results = await pipeline.exec();
    results!.forEach(([err, value], i) => {
      expect(err).toBeNull();
      if (i % 3 === 0) expect(value).toBe('OK');
      else if (i % 3 === 1) expect(value).toBe(`m${i}`);
      else expect(value).toBe(`v${i - 2}`);
    });
  });

  it('refuses what a shared proxy cannot offer with an error naming the command and why', async () => {
    await expect(client.call('CLIENT', 'TRACKING', 'on', 'REDIRECT', '987654')).rejects.toThrow(/^ERR The client ID you want redirect to does not exist$/);
    await expect(client.call('CLIENT', 'CAPA', 'redirect')).rejects.toThrow(/respool: CLIENT CAPA is not supported through respool: .*shares/);
    await expect(client.call('CLIENT', 'NO-TOUCH', 'on')).rejects.toThrow(/respool: CLIENT NO-TOUCH is not supported through respool: .*shares/);
    // answered by respool: it never evicts clients for memory, so the flag always holds
    expect(await client.call('CLIENT', 'NO-EVICT', 'on')).toBe('OK');
    await expect(client.call('CLIENT', 'NO-EVICT', 'maybe')).rejects.toThrow(/^ERR syntax error/);
    // READONLY/READWRITE only choose where respool sends reads: answered locally
    expect(await client.call('READONLY')).toBe('OK');
    expect(await client.call('READWRITE')).toBe('OK');
    // the connection still works afterwards
    expect(await client.ping()).toBe('PONG');
  });

  it('answers CLIENT SETNAME/GETNAME/ID/INFO, SELECT and RESET locally', async () => {
    const c = clientFor(proxy);
    expect(await c.client('SETNAME', 'app-1')).toBe('OK');
    expect(await c.client('GETNAME')).toBe('app-1');
    expect(await c.client('ID')).toBeGreaterThan(0);
    expect(await c.client('INFO')).toMatch(/name=app-1 .*db=0 .*resp=2/);
    expect(await c.select(0)).toBe('OK');
    expect(await c.select(1)).toBe('OK'); // every database of a standalone upstream (select.test.ts)
    expect(await c.client('INFO')).toMatch(/ db=1 /);
    expect(await c.call('RESET')).toBe('RESET');
    expect(await c.client('GETNAME')).toBeNull();
    expect(await c.client('INFO')).toMatch(/ db=0 /);
    c.disconnect();
  });

  it('works with valkey-cli', async () => {
    const cli = (...args: string[]) =>
      run('valkey-cli', ['-h', proxy.address.host, '-p', String(proxy.address.port), ...args]).then((r) => r.stdout.trim());
    expect(await cli('SET', 'cli:key', 'cli-value')).toBe('OK');
    expect(await cli('GET', 'cli:key')).toBe('cli-value');
    expect(await cli('HSET', 'cli:h', 'a', '1')).toBe('1');
    expect(await cli('-3', 'HGETALL', 'cli:h')).toMatch(/a.*1/s);
    expect(await cli('PING')).toBe('PONG');
  });
});
