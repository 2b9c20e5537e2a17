import v8 from 'node:v8';

/**
 * Young-generation collections (scavenges) run on one thread, unless node's own command line
 * names a scavenge flag. Why: respool's young objects barely outlive a request, so a scavenge
 * has little to copy and V8's parallel scavenge spends its pause starting and syncing helper
 * threads, which compete with the process's own I/O for a small machine's cores; every request
 * in flight waits out the pause, so it shows at p99. Measured on the 2-core bench machine
 * (`bench/alloc-per-request.sh`, 200,000 GETs at pipeline 1, 2 runs each): pauses 23.4 / 26.3 ms
 * in all (longest 1.5 / 1.9 ms) with parallel scavenges, 16.1 / 15.0 ms (longest 1.1 / 1.2)
 * without, for the same number of collections. V8 reads this flag at every scavenge, so setting
 * it at start-up takes effect.
 */
export function useSingleThreadedScavenges(execArgv: readonly string[] = process.execArgv): void {
  if (execArgv.some((arg) => arg.includes('scavenge'))) return; // the operator chose
  v8.setFlagsFromString('--no-parallel-scavenge');
}
