import type { RespoolConfig } from '../config/types.js';
import { jsonResponse, type AdminResponse } from './admin-server.js';

const SECRET = /password|token|passphrase|secret/i;

/** The running config as JSON, secrets replaced by "<set>" (GET /config: what a reload changed). */
export function redactedConfig(config: RespoolConfig): unknown {
  return JSON.parse(JSON.stringify(config, (key, value: unknown) => {
    if (key !== '' && SECRET.test(key) && value !== null && value !== undefined) return '<set>';
    return value;
  }));
}

export function configRoute(config: RespoolConfig): () => AdminResponse {
  return () => jsonResponse(200, redactedConfig(config));
}
