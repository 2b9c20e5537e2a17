import { runRespoolCommand } from '../hotkeys/control.js';
import type { Handler } from './types.js';

/** RESPOOL HOTKEYS | NODES | SPLIT …: respool's own command (src/hotkeys/control.ts). */
export const respool: Handler = (session, req) => {
  session.replyNow(runRespoolCommand(session.ctx.hotKeys, req.args, session.state.protocol));
};
