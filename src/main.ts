import { parseCommandLine, ConfigError } from './config/load-config.js';
import { startProxy } from './server.js';
import { createLogger } from './util/logger.js';

/** Graceful drain on SIGTERM/SIGINT: in-flight requests get this long to finish. */
const DRAIN_MS = 10_000;

/** The `respool` command: flags + config file → a running proxy. Exit 2 on bad config. */
export async function main(argv: string[]): Promise<void> {
  let parsed;
  try {
    parsed = parseCommandLine(argv, process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`respool: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  if (parsed.kind !== 'run') {
    process.stdout.write(parsed.text.endsWith('\n') ? parsed.text : `${parsed.text}\n`);
    return;
  }
  const log = createLogger(parsed.config.logLevel);
  let proxy;
  try {
    proxy = await startProxy(parsed.config, { log, ...(parsed.configFile !== undefined ? { configFile: parsed.configFile } : {}) });
  } catch (err) {
    log.fatal({ err: (err as Error).message }, 'respool could not start');
    process.exit(1);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(1); // a second signal: stop now
    stopping = true;
    log.info({ signal, drainMs: DRAIN_MS }, 'draining');
    void proxy.close(DRAIN_MS).then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}
