import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration suites start real valkey-server processes; 2 cores → keep files from piling up.
    fileParallelism: true,
    maxWorkers: 2,
    pool: 'forks',
    reporters: ['default', 'json'],
    outputFile: { json: '.tmp/vitest-results.json' },
  },
});
