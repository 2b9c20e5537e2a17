/**
 * respool as a child process (the compiled bin), for tests that must kill it (SIGKILL), pause it
 * (SIGSTOP / SIGCONT) or restart it on the same port. Children are tied to this process
 * (setpriv --pdeathsig: the kernel kills them if the test process dies), and `stopAll` ends the
 * ones still running, by PID.
 */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { spawnTied } from '../harness/valkey-processes.js';
import { RESPOOL_BIN } from './respool-cli.js';

const running = new Set<RespoolProcess>();

export class RespoolProcess {
  /** JSON log lines written so far (stderr). */
  readonly lines: string[] = [];
  private child: ChildProcess;
  private exited: Promise<void>;
  private partial = '';

  private constructor(readonly args: readonly string[], readonly port: number, readonly env: Record<string, string>, private readonly cgroupProcs: string | null) {
    this.child = this.spawn();
    this.exited = this.watchExit();
  }

  /**
   * Starts `respool args…` listening on 127.0.0.1:port and waits until it answers PING;
   * `cgroupProcs`: it runs in that cgroup from its first instruction (test/helpers/memory-cgroup.ts).
   */
  static async start(port: number, args: readonly string[], env: Record<string, string> = {}, readyTimeoutMs = 20_000, cgroupProcs: string | null = null): Promise<RespoolProcess> {
    const p = new RespoolProcess(['--listen', `127.0.0.1:${port}`, ...args], port, env, cgroupProcs);
    running.add(p);
    await p.ready(readyTimeoutMs);
    return p;
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Log lines with `"event":"<kind>"`, parsed. */
  events(kind: string): Array<Record<string, unknown>> {
    return this.lines.filter((l) => l.includes(`"event":"${kind}"`)).map((l) => JSON.parse(l) as Record<string, unknown>);
  }

  kill(): Promise<void> {
    if (this.alive) this.child.kill('SIGKILL');
    running.delete(this);
    return this.exited;
  }

  pause(): void {
    this.child.kill('SIGSTOP');
  }

  resume(): void {
    this.child.kill('SIGCONT');
  }

  /** Graceful stop (SIGTERM: drain), then SIGKILL after 15 s. */
  async stop(): Promise<void> {
    if (this.alive) {
      this.child.kill('SIGCONT');
      this.child.kill('SIGTERM');
      const t = setTimeout(() => this.child.kill('SIGKILL'), 15_000);
      await this.exited;
      clearTimeout(t);
    }
    running.delete(this);
  }

  /** Starts the same command again (same port), after the old process is gone. */
  async restart(readyTimeoutMs = 20_000): Promise<void> {
    await this.kill();
    this.child = this.spawn();
    this.exited = this.watchExit();
    running.add(this);
    await this.ready(readyTimeoutMs);
  }

  private spawn(): ChildProcess {
    const options = { stdio: ['ignore', 'pipe', 'pipe'] as Array<'ignore' | 'pipe'>, env: { ...process.env, ...this.env } };
    // In a cgroup: the shell joins it, then becomes node (same pid), so respool starts inside it.
    const child = this.cgroupProcs === null
      ? spawnTied('node', [RESPOOL_BIN, ...this.args], options)
      : spawnTied('sh', ['-c', 'echo $$ > "$0" && exec "$@"', this.cgroupProcs, 'node', RESPOOL_BIN, ...this.args], options);
    const take = (d: Buffer) => {
      const text = this.partial + d.toString();
      const parts = text.split('\n');
      this.partial = parts.pop()!;
      for (const line of parts) if (line.trim() !== '') this.lines.push(line);
    };
    child.stderr!.on('data', take);
    child.stdout!.on('data', take);
    return child;
  }

  private watchExit(): Promise<void> {
    const child = this.child;
    return new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
  }

  private async ready(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!this.alive) throw new Error(`respool on port ${this.port} exited early:\n${this.lines.slice(-20).join('\n')}`);
      if (await pings(this.port)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`respool on port ${this.port} did not answer PING within ${timeoutMs} ms:\n${this.lines.slice(-20).join('\n')}`);
  }
}

/** Ends every respool child still running (tests call it in afterAll). */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((p) => p.kill()));
}

function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(1000, () => done(false));
    s.once('error', () => done(false));
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}
