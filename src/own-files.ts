/**
 * Files respool reads from its own package. Paths are resolved from this module, which sits at
 * the top of src/ (tests) and of dist/, where the bundle dist/respool.js sits too (see
 * scripts/bundle.mjs): the same relative paths hold unbundled, bundled and under vitest.
 */
import { readFileSync } from 'node:fs';

/** The generated command table (src/commands/, copied to dist/commands/ by tsc). */
export const BUILTIN_COMMANDS_FILE = new URL('./commands/builtin-commands.json', import.meta.url);

/** The config file's validator, generated ahead of time (config/schema-validator.ts); copied to dist/ by scripts/bundle.mjs. */
export const CONFIG_VALIDATOR_FILE = new URL('./config/config-validator.cjs', import.meta.url);

/** The status page's files (src/admin/status/, copied to dist/admin/status/ by scripts/bundle.mjs). */
export const STATUS_PAGE_DIR = new URL('./admin/status/', import.meta.url);

/** package.json's version ("unknown" if it cannot be read). */
export const RESPOOL_VERSION: string = ((): string => {
  try {
    return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
})();
