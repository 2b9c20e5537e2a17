import { RequestFrame } from '../resp/request-framer.js';
import { dispatch } from '../handlers/index.js';
import type { DispatchedSession } from '../client/handler-session.js';
import type { PausedClient } from '../client/client-pause.js';

/** A session as a request CLIENT PAUSE holds sees it (client-session.ts). */
type HoldingSession = DispatchedSession & PausedClient & { pauseReading(): void };

/**
 * CLIENT PAUSE holds this request (dispatch said so): the session keeps the copy returned, stops
 * reading until the pause ends (ClientPause.hold: it is told then, resumeAfterPause), and CLIENT
 * LIST shows it blocked.
 */
export function holdForPause(session: HoldingSession, frame: RequestFrame): RequestFrame {
  session.state.pausedHeld = true;
  session.pauseReading();
  session.ctx.clientPause.hold(session);
  return RequestFrame.of(frame.args.map((a) => Buffer.from(a)), Buffer.from(frame.raw));
}

/** The held request dispatched again: true when it went; false while the pause still holds it (held again). */
export function dispatchHeld(session: HoldingSession, frame: RequestFrame): boolean {
  if (!dispatch(session, frame)) {
    session.ctx.clientPause.hold(session);
    return false;
  }
  session.state.pausedHeld = false;
  return true;
}
