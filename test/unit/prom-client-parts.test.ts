// respool takes prom-client's classes from the files of its lib/ (src/metrics/prom-client-parts.ts),
// not from its index, which would also load node:https → node:tls. They must be the very classes
// the index exports: an upgrade that moves or renames a file fails here, not in production.
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import * as PromClient from 'prom-client';
import { PromCounter, PromGauge, PromRegistry, aggregatorRegistry, collectDefaultMetrics } from '../../src/metrics/prom-client-parts.js';

describe('prom-client parts', () => {
  it("are the index's own exports", () => {
    expect(PromCounter).toBe(PromClient.Counter);
    expect(PromGauge).toBe(PromClient.Gauge);
    expect(PromRegistry).toBe(PromClient.Registry);
    expect(collectDefaultMetrics).toBe(PromClient.collectDefaultMetrics);
    expect(aggregatorRegistry()).toBe(PromClient.AggregatorRegistry);
  });

  it('load neither node:https nor node:tls by themselves', async () => {
    // A fresh process: this test process has loaded prom-client's index already.
    const { execFileSync } = createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
    const script = [
      "const r = require('module').createRequire(process.cwd() + '/');",
      "for (const f of ['counter', 'gauge', 'registry', 'defaultMetrics']) r('prom-client/lib/' + f);",
      "console.log(JSON.stringify(['https', 'tls', 'crypto'].filter((m) => process.moduleLoadList.includes('NativeModule ' + m))));",
    ].join('\n');
    const loaded = JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' })) as string[];
    expect(loaded.filter((m) => m !== 'crypto')).toEqual([]);
  });
});
