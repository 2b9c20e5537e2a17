// What deploy/kubernetes/sidecar.yaml tells the container to run, for the benches that measure
// respool the way that manifest runs it (bench/footprint.mjs, bench/memory-for-cpu.mjs).
import fs from 'node:fs';
import { parseAllDocuments } from 'yaml';

/** The node flags the manifest gives respool's container (its `command` between node and the script). */
export function sidecarNodeFlags() {
  const docs = parseAllDocuments(fs.readFileSync(new URL('../../deploy/kubernetes/sidecar.yaml', import.meta.url), 'utf8')).map((d) => d.toJS());
  for (const doc of docs) {
    const spec = doc?.spec?.template?.spec;
    for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
      const script = (c.command ?? []).findIndex((a) => String(a).endsWith('bin/respool.js'));
      if (script > 0) return c.command.slice(1, script).map(String);
    }
  }
  return [];
}
