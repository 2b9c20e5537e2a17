import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { makeTestCerts, type TestCerts } from '../harness/valkey-tls.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { RESPOOL_BIN as BIN, runRespool } from '../helpers/respool-cli.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { mirrorPassword } from '../../src/acl/upstream-identity.js';

/**
 * No secret leaves respool (issue 18): passwords in users' rules and fields, passwordEnv and
 * passwordFile values, the admin and read tokens, upstreamAuth's and mapped identities'
 * passwords, the mirror secret and the passwords derived from it, TLS private keys. They are
 * searched for in the output of every admin endpoint, the whole log at debug, the replies to
 * failing AUTH, HELLO, TLS and config cases, and --help.
 */

const SECRETS = {
  userRule: 'rule-pass-1111',
  userField: 'field-pass-2222',
  userEnv: 'env-pass-3333',
  mappedFile: 'mapped-pass-4444',
  upstream: 'upstream-pass-5555',
  adminToken: 'admin-token-6666-abcdef',
  readToken: 'read-token-7777-abcdef',
  mirrorSecret: 'mirror-secret-8888-abcdef',
};

describe('secrets stay inside respool (issue 18)', () => {
  let node: ValkeyNode;
  let certs: TestCerts;
  let child: ChildProcess;
  let output = '';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'respool-secrets-'));
  let port = 0;
  let tlsPort = 0;
  let admin = '';
  const all = () => [...Object.values(SECRETS), mirrorPassword(SECRETS.mirrorSecret, 'app'), mirrorPassword(SECRETS.mirrorSecret, 'mir')];
  const keyText = () => fs.readFileSync(certs.serverKey, 'utf8').split('\n').find((l) => l.length > 40 && !l.startsWith('-----'))!;
  const expectClean = (what: string, text: string) => {
    for (const secret of [...all(), keyText()]) expect(text.includes(secret), `${what} holds ${secret.slice(0, 12)}…`).toBe(false);
  };

  beforeAll(async () => {
    certs = makeTestCerts();
    node = await startStandalone({ password: SECRETS.upstream });
    // The mapped identity, made on the node by the operator.
    const c = await RawConnection.connect(node.port);
    expect(await c.call('AUTH', SECRETS.upstream)).toBe('+OK\r\n');
    expect(await c.call('ACL', 'SETUSER', 'app-node', 'on', `>${SECRETS.mappedFile}`, '~app:*', '+@all')).toBe('+OK\r\n');
    c.close();
    fs.writeFileSync(path.join(dir, 'mapped.pw'), `${SECRETS.mappedFile}\n`);
    fs.writeFileSync(path.join(dir, 'config.yaml'), [
      'listen: "127.0.0.1:0"',
      'listenTls: "127.0.0.1:0"',
      `tls: { cert: ${JSON.stringify(certs.serverCert)}, key: ${JSON.stringify(certs.serverKey)} }`,
      `upstreams: ["127.0.0.1:${node.port}"]`,
      `admin: { address: "127.0.0.1:0", token: ${SECRETS.adminToken}, readToken: ${SECRETS.readToken} }`,
      `upstreamAuth: { password: ${SECRETS.upstream} }`,
      `acl: { mirrorSecret: ${SECRETS.mirrorSecret} }`,
      'logLevel: debug',
      'users:',
      `  - { name: default, rules: "on >${SECRETS.userRule} +@all ~* &*" }`,
      `  - { name: app, rules: "on ~app:* +@all", password: ${SECRETS.userField}, upstream: { username: app-node, passwordFile: ${JSON.stringify(path.join(dir, 'mapped.pw'))} } }`,
      '  - { name: env, passwordEnv: ENV_USER_PW }',
      '  - { name: mir, rules: "on >mir-pw ~m:* +@read +@write +@scripting", upstream: mirror }',
    ].join('\n'));
    child = spawn('node', [BIN, '--config', path.join(dir, 'config.yaml')], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ENV_USER_PW: SECRETS.userEnv } });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    await waitFor(() => output.includes('"respool listening"'), 'respool listening', 15_000);
    const line = JSON.parse(output.split('\n').find((l) => l.includes('"respool listening"'))!) as { listen: { port: number }; listenTls: { port: number }; admin: { port: number } };
    port = line.listen.port;
    tlsPort = line.listenTls.port;
    admin = `http://127.0.0.1:${line.admin.port}`;
  }, 60_000);

  afterAll(async () => {
    child?.kill('SIGTERM');
    await node?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('admin endpoints, the debug log, failing AUTH / HELLO / TLS / identity cases and --help hold none of them', async () => {
    // Traffic that logs: identities used (mapped, mirrored), denials, failed AUTHs.
    const c = await RawConnection.connect(port);
    const replies: string[] = [];
    for (const cmd of [
      ['AUTH', 'app', 'wrong'], ['AUTH', 'nobody', SECRETS.userField], ['AUTH', 'wrong-password-only'],
      ['HELLO', '3', 'AUTH', 'app', 'wrong'], ['HELLO', '2', 'AUTH', 'env', SECRETS.userRule],
      ['AUTH', 'app', SECRETS.userField], ['SET', 'app:1', 'x'], ['EVAL', "return redis.call('get','app:1')", '0'], ['GET', 'other'],
      ['AUTH', 'mir', 'mir-pw'], ['SET', 'm:1', 'x'], ['EVAL', "return redis.call('get','secret')", '0'], ['ACL', 'WHOAMI'],
      ['AUTH', 'env', SECRETS.userEnv], ['ACL', 'LOG'], ['CONFIG', 'GET', 'requirepass'], ['CONFIG', 'GET', '*'], ['CONFIG', 'GET', 'masterauth'],
    ]) replies.push(await c.call(...cmd));
    c.close();
    expect(replies[5]).toBe('+OK\r\n');
    expect(replies[6]).toBe('+OK\r\n'); // through the mapped identity
    expect(replies[9]).toBe('+OK\r\n');
    expect(replies[10]).toBe('+OK\r\n'); // through the mirrored identity
    expect(replies[11]).toMatch(/^-ERR ACL failure in script: No permissions to access a key/);
    for (const [i, r] of replies.entries()) expectClean(`the reply to command ${i}`, r);

    // A TLS client that fails its handshake.
    await new Promise<void>((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port: tlsPort, rejectUnauthorized: true }, () => resolve());
      s.on('error', () => resolve());
    });

    // Every admin GET endpoint, with the read token; without it, the read routes are refused.
    const got: string[] = [];
    for (const p of ['/config', '/topology', '/hotkeys', '/metrics', '/healthz', '/readyz', '/nope']) {
      const res = await fetch(`${admin}${p}`, { headers: { authorization: `Bearer ${SECRETS.readToken}` } });
      got.push(`${p} ${res.status} ${await res.text()}`);
    }
    expect(got[0]).toMatch(/^\/config 200 /);
    expect(got[0]).toContain('"rules":"on >(redacted) +@all ~* &*"');
    expect((await fetch(`${admin}/config`)).status).toBe(401);
    expect((await fetch(`${admin}/metrics`)).status).toBe(200);
    expect((await fetch(`${admin}/config`, { headers: { authorization: `Bearer ${SECRETS.adminToken}` } })).status).toBe(200);
    got.push(await (await fetch(`${admin}/config`, { headers: { authorization: 'Bearer not-the-token-xxxxx' } })).text());
    got.push(await (await fetch(`${admin}/hotkeys/split`, { method: 'POST', body: '{}' })).text());
    expectClean('the admin endpoints', got.join('\n'));

    // A mapped identity whose password the node no longer takes: an error naming the user only.
    const n = await RawConnection.connect(node.port);
    await n.call('AUTH', SECRETS.upstream);
    await n.call('ACL', 'SETUSER', 'app-node', 'resetpass', '>changed-on-the-node');
    await n.call('CLIENT', 'KILL', 'USER', 'app-node');
    n.close();
    const d = await RawConnection.connect(port);
    await d.call('AUTH', 'app', SECRETS.userField);
    const refused = await d.call('GET', 'app:1');
    d.close();
    expect(refused).toMatch(/^-ERR respool: upstream .* unavailable .*WRONGPASS/);
    expectClean('the identity refusal', refused);

    // Config errors and --help.
    const bad = path.join(dir, 'bad.yaml');
    fs.writeFileSync(bad, `upstreams: ["127.0.0.1:1"]\nusers: [{ name: a, rules: "on #${SECRETS.userRule} >${SECRETS.userField} +@nope" }, { name: b, password: ${SECRETS.userEnv}, passwordEnv: X }]\nadmin: { token: ${SECRETS.adminToken}, tokenFile: /nope }\nacl: { mirrorSecret: ${SECRETS.mirrorSecret}, mirrorSecretEnv: Y }\n`);
    const failed = await runRespool(['--config', bad]);
    expect(failed.code).toBe(2);
    const help = await runRespool(['--help']);
    const env = await runRespool(['--upstream', '127.0.0.1:1', '--upstream-password', '']);
    expectClean('config errors and --help', `${failed.stderr}${failed.stdout}${help.stdout}${env.stderr}`);

    await sleep(300); // the last log lines
    expect(output).toMatch(/"level":"debug"/); // debug lines were written
    expectClean('the log', output);
  }, 60_000);
});
