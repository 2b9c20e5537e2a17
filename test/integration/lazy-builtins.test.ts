// A sidecar that uses no TLS, no users and no scripts never loads node:tls or node:crypto
// (src/util/lazy-builtins.ts, src/metrics/prom-client-parts.ts): on Node 24 they cost 5–8 MiB of
// RSS per pod. And the bundle (dist/respool.js, scripts/bundle.mjs) takes node:http and node:fs
// with require(), so node:http's lazy WebSocket (all of undici) is never built either. The features
// that need them load them on first use: EVAL hashes its script, and then node:crypto is there.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';

const run = promisify(execFile);
const BUNDLE = new URL('../../dist/respool.js', import.meta.url).href;
/**
 * Starts the bundled respool in a fresh node process, sends it `commands` in one pipeline, and
 * returns the replies and which of Node's modules that process had loaded by then.
 */
async function loadedAfter(upstreamPort: number, commands: string[][]): Promise<{ replies: string[]; loaded: string[] }> {
  const port = await freePort();
  // A client of its own (net only: the test harness's loads node:tls) for simple, integer and
  // bulk replies, each as its type byte and text ('+OK', ':1', '$v1').
  const script = `
    import net from 'node:net';
    const { main } = await import(${JSON.stringify(BUNDLE)});
    await main(['--listen', '127.0.0.1:${port}', '--upstream', '127.0.0.1:${upstreamPort}', '--mode', 'standalone', '--log-level', 'error']);
    const commands = ${JSON.stringify(commands)};
    const socket = net.connect(${port}, '127.0.0.1');
    socket.write(commands.map((c) => '*' + c.length + '\\r\\n' + c.map((a) => '$' + Buffer.byteLength(a) + '\\r\\n' + a + '\\r\\n').join('')).join(''));
    let buffer = Buffer.alloc(0);
    const replies = [];
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const eol = buffer.indexOf('\\r\\n');
        if (eol < 0) return;
        const line = buffer.subarray(1, eol).toString();
        if (buffer[0] !== 36) { replies.push(String.fromCharCode(buffer[0]) + line); buffer = buffer.subarray(eol + 2); }
        else { const n = Number(line); if (buffer.length < eol + 2 + n + 2) return; replies.push('$' + buffer.subarray(eol + 2, eol + 2 + n).toString()); buffer = buffer.subarray(eol + 2 + n + 2); }
        if (replies.length === commands.length) finish();
      }
    });
    function finish() {
      const loaded = ['tls', 'crypto', 'https', 'http2', 'internal/deps/undici/undici'].filter((m) => process.moduleLoadList.includes('NativeModule ' + m));
      process.stdout.write(JSON.stringify({ replies, loaded }) + '\\n');
      process.exit(0);
    }
  `;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 30_000 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as { replies: string[]; loaded: string[] };
}

describe('Node modules loaded on first use', () => {
  let server: ValkeyNode;

  beforeAll(async () => {
    server = await startStandalone();
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('serves PING, SET, GET, CLIENT, EXISTS and DEL without node:tls, node:crypto or undici loaded', async () => {
    const { replies, loaded } = await loadedAfter(server.port, [['PING'], ['SET', 'lazy:k', 'v1'], ['GET', 'lazy:k'], ['CLIENT', 'SETNAME', 'app'], ['EXISTS', 'lazy:k', 'lazy:none'], ['DEL', 'lazy:k']]);
    expect(replies).toEqual(['+PONG', '+OK', '$v1', '+OK', ':1', ':1']);
    expect(loaded).toEqual([]);
  });

  it('loads node:crypto when a feature needs it (EVAL hashes the script)', async () => {
    const { replies, loaded } = await loadedAfter(server.port, [['EVAL', "return 'lazy'", '0']]);
    expect(replies).toEqual(['$lazy']);
    expect(loaded).toEqual(['crypto']);
  });
});
