import { refused } from './refused.js';
import type { Handler } from './types.js';

/** Blocking commands (BLPOP, BLMOVE, BZPOPMIN, XREAD … BLOCK): on a leased connection. */
export const blocking: Handler = refused;
