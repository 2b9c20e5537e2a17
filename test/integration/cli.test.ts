import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { RESPOOL_BIN as BIN, runRespool as respool } from '../helpers/respool-cli.js';

const run = promisify(execFile);

describe('the respool command', () => {
  let server: ValkeyNode;
  beforeAll(async () => {
    server = await startStandalone();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('documents every option in --help', async () => {
    const { code, stdout } = await respool(['--help']);
    expect(code).toBe(0);
    for (const flag of ['--listen', '--upstream', '--mode', '--admin', '--config', '--connections-per-node', '--log-level']) {
      expect(stdout).toContain(flag);
    }
  });

  it('exits 2 with a message naming the bad flag', async () => {
    const bad = await respool(['--upstream', '127.0.0.1:7000', '--connections-per-node', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--connections-per-node: must be an integer from 1 to 64 \(got "0"\)/);
    const typo = await respool(['--listn', '127.0.0.1:1']);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toMatch(/did you mean --listen/);
    const missing = await respool([]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--upstream .* is required/);
  });

  it('exits 2 with a message naming the bad config field', async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'respool-cli-')), 'bad.yaml');
    fs.writeFileSync(file, 'upstreams: ["127.0.0.1:7000"]\nconectionsPerNode: 3\n');
    const result = await respool(['--config', file]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/unknown field "conectionsPerNode".*did you mean "connectionsPerNode"/);
  });

  it('serves traffic, and drains and exits 0 on SIGTERM', async () => {
    const child = spawn('node', [BIN, '--listen', '127.0.0.1:0', '--upstream', `127.0.0.1:${server.port}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line: ${stderr}`)), 15_000);
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        const match = /"listen":\{"host":"127\.0\.0\.1","port":(\d+)\}/.exec(stderr);
        if (match) {
          clearTimeout(timer);
          resolve(Number(match[1]));
        }
      });
    });
    const { stdout } = await run('valkey-cli', ['-p', String(port), 'SET', 'cli-bin', 'ok']);
    expect(stdout.trim()).toBe('OK');
    expect((await run('valkey-cli', ['-p', String(port), 'GET', 'cli-bin'])).stdout.trim()).toBe('ok');
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toMatch(/draining/);
  });
});
