import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { refusalReason } from '../commands/proxy-handling.js';
import type { Handler } from '../client/handler-session.js';

/** Commands a shared proxy cannot offer: an error naming the command and the reason. */
export const refused: Handler = (session, req) => {
  session.ctx.metrics?.commandErrorCounter(req.command, 'proxy').inc();
  const reason = req.spec ? refusalReason(req.spec) : undefined;
  session.replyNow(encodeError(ProxyError.refused(req.command, reason ?? 'not supported by respool')));
};
