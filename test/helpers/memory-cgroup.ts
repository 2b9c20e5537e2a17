/**
 * A memory cgroup of the test's own with a limit, for running respool as a container with a
 * memory limit would (limits.maxMemory's auto reads it: util/cgroup-memory.ts). cgroup v1
 * (memory.limit_in_bytes) or v2 (memory.max), made under the root of the hierarchy; null where
 * the machine lets this process make none (not root, no writable memory controller) — the tests
 * then set limits.maxMemory explicitly.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface MemoryCgroup {
  readonly path: string;
  /** The file a process joins the group through (its pid written to it). */
  readonly procs: string;
  readonly limit: number;
  /** Times the kernel's OOM killer killed a process of the group (v1 memory.oom_control, v2 memory.events). */
  oomKills(): number;
  /** Removes the group (its processes must have exited). */
  remove(): Promise<void>;
}

export function memoryCgroup(name: string, limit: number): MemoryCgroup | null {
  const v1 = '/sys/fs/cgroup/memory';
  const v2 = '/sys/fs/cgroup';
  const tries: Array<{ dir: string; limitFile: string; oom: (dir: string) => number }> = [];
  if (fs.existsSync(path.join(v1, 'memory.limit_in_bytes'))) {
    tries.push({ dir: path.join(v1, name), limitFile: 'memory.limit_in_bytes', oom: (d) => field(path.join(d, 'memory.oom_control'), 'oom_kill') });
  } else if (fs.existsSync(path.join(v2, 'cgroup.controllers'))) {
    tries.push({ dir: path.join(v2, name), limitFile: 'memory.max', oom: (d) => field(path.join(d, 'memory.events'), 'oom_kill') });
  }
  for (const t of tries) {
    try {
      fs.mkdirSync(t.dir);
    } catch {
      continue;
    }
    try {
      fs.writeFileSync(path.join(t.dir, t.limitFile), String(limit));
      if (t.limitFile === 'memory.limit_in_bytes' && fs.existsSync(path.join(t.dir, 'memory.memsw.limit_in_bytes'))) {
        fs.writeFileSync(path.join(t.dir, 'memory.memsw.limit_in_bytes'), String(limit));
      }
    } catch {
      fs.rmdirSync(t.dir);
      continue;
    }
    const dir = t.dir;
    return {
      path: dir,
      procs: path.join(dir, 'cgroup.procs'),
      limit,
      oomKills: () => t.oom(dir),
      remove: async () => {
        for (let i = 0; i < 50; i++) {
          try {
            fs.rmdirSync(dir);
            return;
          } catch {
            await new Promise((r) => setTimeout(r, 100));
          }
        }
      },
    };
  }
  return null;
}

/** `name value` lines: the value of `name`, 0 when absent. */
function field(file: string, name: string): number {
  try {
    const line = fs.readFileSync(file, 'utf8').split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? 0 : Number(line.split(' ')[1]);
  } catch {
    return 0;
  }
}
