import { readFileSync } from 'node:fs';

/**
 * The memory limit of the cgroup this process runs in (a container's limit), in bytes, or null
 * when there is none: cgroup v2's memory.max, or cgroup v1's memory.limit_in_bytes — the smallest
 * along the path from the process's group up to the root, as the kernel applies every ancestor's
 * limit too. "max", a v1 limit of 2^62 or more, or no readable file: no limit.
 *
 *   /proc/self/cgroup   "0::/kubepods/pod…/…"            (v2: one line, hierarchy 0)
 *                       "4:memory:/docker/…"             (v1: the memory controller's line)
 */
export function cgroupMemoryLimit(read: (path: string) => string | null = readText): number | null {
  const table = read('/proc/self/cgroup');
  if (table === null) return null;
  let v1: string | null = null;
  let v2: string | null = null;
  for (const line of table.split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line.trim()) ?? [];
    if (path === undefined) continue;
    if (controllers === '') v2 = path;
    else if (controllers!.split(',').includes('memory')) v1 = path;
  }
  if (v1 !== null) return smallestAlong('/sys/fs/cgroup/memory', v1, 'memory.limit_in_bytes', read);
  if (v2 !== null) return smallestAlong('/sys/fs/cgroup', v2, 'memory.max', read);
  return null;
}

/** Limits at or above this (v1's "unlimited" is 2^63 rounded to the page) mean none. */
const NO_LIMIT = 2 ** 62;

function smallestAlong(root: string, path: string, file: string, read: (path: string) => string | null): number | null {
  const parts = path.split('/').filter((p) => p !== '');
  let smallest: number | null = null;
  for (let n = parts.length; n >= 0; n--) {
    const text = read(`${root}/${parts.slice(0, n).join('/')}${n > 0 ? '/' : ''}${file}`);
    if (text === null) continue;
    const value = text.trim() === 'max' ? NaN : Number(text.trim());
    if (!Number.isFinite(value) || value <= 0 || value >= NO_LIMIT) continue;
    if (smallest === null || value < smallest) smallest = value;
  }
  return smallest;
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}
