import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

/** The compiled `respool` command (npm test builds dist/ first). */
export const RESPOOL_BIN = fileURLToPath(new URL('../../bin/respool.js', import.meta.url));

const run = promisify(execFile);

/** Runs `respool args…` to its end; resolves with its exit code and output. */
export async function runRespool(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run('node', [RESPOOL_BIN, ...args], { timeout: 20_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
