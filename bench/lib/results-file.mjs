// bench/RESULTS.md holds one section per benchmark, each between markers
//   <!-- begin:NAME --> … <!-- end:NAME -->
// A benchmark rewrites only its own section, so running one bench keeps the others' results.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const RESULTS_FILE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'RESULTS.md');

const HEADER = `# respool benchmark results

Each section below is written by one benchmark script (see bench/README in each section's
"how to rerun" line); sections are replaced independently. Numbers are from this 2-core
machine, with all processes on loopback: compare the ratios measured side by side, not the
absolute figures.
`;

/** Order in which sections appear when first created. */
const ORDER = ['throughput', 'floor', 'observe-overhead', 'hotkeys', 'split-reads', 'near-cache', 'near-cache-pinned', 'storm', 'failover', 'fleet', 'az-reads', 'blocking', 'parked-pops', 'pubsub-fanout', 'mget', 'cross-slot', 'identity', 'key-names', 'key-names-pinned', 'server-cost', 'node-versions', 'tls', 'conn-tls', 'footprint', 'memory-for-cpu', 'deep-pipeline', 'slow-readers', 'far-node', 'takeover', 'soak'];

export function writeSection(name, markdown) {
  let text = fs.existsSync(RESULTS_FILE) ? fs.readFileSync(RESULTS_FILE, 'utf8') : HEADER;
  const begin = `<!-- begin:${name} -->`;
  const end = `<!-- end:${name} -->`;
  const block = `${begin}\n${markdown.trim()}\n${end}`;
  const start = text.indexOf(begin);
  const stop = text.indexOf(end);
  if (start >= 0 && stop > start) {
    text = text.slice(0, start) + block + text.slice(stop + end.length);
  } else {
    // insert before the first existing section that comes later in ORDER, else append
    const later = ORDER.slice(ORDER.indexOf(name) + 1).map((n) => text.indexOf(`<!-- begin:${n} -->`)).filter((i) => i >= 0);
    const at = later.length ? Math.min(...later) : -1;
    text = at >= 0 ? `${text.slice(0, at)}${block}\n\n${text.slice(at)}` : `${text.trimEnd()}\n\n${block}\n`;
  }
  fs.writeFileSync(RESULTS_FILE, text);
}
