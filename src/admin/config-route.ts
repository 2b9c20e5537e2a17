import type { RespoolConfig } from '../config/types.js';
import { redactRules } from '../acl/users.js';
import { jsonResponse, type AdminResponse } from './admin-server.js';

const SECRET = /password|token|passphrase|secret/i;

/**
 * The running config as JSON, secrets replaced by "<set>" (GET /config: what a reload changed):
 * every password, token, passphrase and secret, and the password rules inside users' ACL rules.
 */
export function redactedConfig(config: RespoolConfig): unknown {
  return JSON.parse(JSON.stringify(config, (key, value: unknown) => {
    if (key !== '' && SECRET.test(key) && value !== null && value !== undefined) return '<set>';
    if (key === 'rules' && typeof value === 'string') return redactRules(value);
    return value;
  }));
}

export function configRoute(config: RespoolConfig): () => AdminResponse {
  return () => jsonResponse(200, redactedConfig(config));
}
