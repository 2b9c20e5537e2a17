/**
 * Logging: pino, JSON lines on stderr (stdout stays free for the CLI's own output).
 *
 * `log` is the process-wide logger; modules import it and create children
 * (`log.child({ component: 'cluster' })`). main re-levels it with `setLogLevel(config.logLevel)`.
 * Note: a pino child copies its parent's level when created, so call `setLogLevel` before
 * components create their children.
 */
import pino from 'pino';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

const LEVELS: ReadonlySet<string> = new Set<LogLevel>(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

export function isLogLevel(s: string): s is LogLevel {
  return LEVELS.has(s);
}

export interface LoggerOptions {
  /** Where JSON lines go. Default: stderr (fd 2), written synchronously. */
  destination?: pino.DestinationStream | NodeJS.WritableStream;
}

function assertLevel(level: string): asserts level is LogLevel {
  if (!isLogLevel(level)) {
    throw new Error(`log level must be one of ${[...LEVELS].join(', ')} (got ${JSON.stringify(level)})`);
  }
}

/** A pino logger named "respool" writing JSON lines (level as a label, ISO time) to stderr. */
export function createLogger(level: string, opts: LoggerOptions = {}): pino.Logger {
  assertLevel(level);
  const destination = opts.destination ?? pino.destination({ fd: 2, sync: true });
  // Children (log.child({ component })) follow the root's level when it changes (a SIGHUP
  // reload of logLevel): pino copies the level into a child only when the child is made.
  const children = new Set<WeakRef<pino.Logger>>(); // weak: a child made per connection must not leak
  let following = false;
  const logger = pino(
    {
      name: 'respool',
      level,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      onChild: (child) => {
        children.add(new WeakRef(child));
      },
    },
    destination as pino.DestinationStream,
  );
  logger.on('level-change', (label) => {
    if (following || logger.level !== label) return; // a child's own change, or ours while re-levelling
    following = true;
    try {
      for (const ref of children) {
        const child = ref.deref();
        if (child === undefined) children.delete(ref);
        else child.level = label;
      }
    } finally {
      following = false;
    }
  });
  return logger;
}

function levelFromEnv(): LogLevel {
  const v = process.env['RESPOOL_LOG_LEVEL']?.trim().toLowerCase();
  return v !== undefined && isLogLevel(v) ? v : 'info';
}

/** The process-wide logger (level from RESPOOL_LOG_LEVEL, default info). */
export const log: pino.Logger = createLogger(levelFromEnv());

/** Re-level the process-wide logger (e.g. from config.logLevel). Throws on an unknown level. */
export function setLogLevel(level: string): void {
  assertLevel(level);
  log.level = level;
}
