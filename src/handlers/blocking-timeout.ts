import type { CommandRequest, HandlerSession } from '../client/handler-session.js';

/** The command's own timeout in ms (null: for ever); one that does not parse is bounded by timeouts.commandMs (the node refuses it at once). */
export function commandTimeoutMs(session: HandlerSession, req: CommandRequest): number | null {
  const parsed = blockingTimeoutMs(req);
  return parsed === -1 ? session.ctx.config.timeouts.commandMs : parsed;
}

const B_BLOCK = 'block';
const DECIMAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
/** setTimeout's largest delay; the deadline adds dedicated.blockMarginMs on top, so keep room. */
const MAX_TIMER_MS = 2 ** 31 - 1 - 86_400_000;

/**
 * The command's own timeout in ms, null for 0 (wait forever), -1 when it does not parse (the
 * server refuses it at once; the shared links' command timeout bounds the wait). Seconds (float)
 * for the list and sorted-set commands, BLOCK milliseconds for XREAD/XREADGROUP.
 */
export function blockingTimeoutMs(req: CommandRequest): number | null {
  const { args, command } = req;
  let text: string | undefined;
  let scale = 1000;
  if (command === 'xread' || command === 'xreadgroup') {
    scale = 1;
    for (let i = 1; i < args.length - 1; i++) {
      if (args[i]!.length === 5 && args[i]!.toString('latin1').toLowerCase() === B_BLOCK) {
        text = args[i + 1]!.toString('latin1');
        break;
      }
    }
  } else if (command === 'blmpop' || command === 'bzmpop') {
    text = args[1]?.toString('latin1');
  } else {
    text = args[args.length - 1]?.toString('latin1');
  }
  if (text === undefined || !DECIMAL.test(text)) return -1;
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0) return -1;
  const ms = Math.ceil(value * scale);
  // 0 waits forever; so, in practice, does anything past a timer's range (~24.8 days).
  return value === 0 || ms > MAX_TIMER_MS ? null : ms;
}
