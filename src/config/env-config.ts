// Every setting from the environment, so a container needs no config file.
//
// The name of a setting's variable is RESPOOL_ followed by its path in the config file, each
// segment's camelCase words in UPPER_SNAKE_CASE, segments joined by "_":
//   timeouts.commandMs → RESPOOL_TIMEOUTS_COMMAND_MS, connectionsPerNode → RESPOOL_CONNECTIONS_PER_NODE,
//   hotKeys.detection.sampleRate → RESPOOL_HOT_KEYS_DETECTION_SAMPLE_RATE, admin.token → RESPOOL_ADMIN_TOKEN.
// Values are written as in the file: sizes and durations with units ("5s", "64mb"), lists as
// "a,b" or a YAML flow list ("[a, b]", "[{name: app, passwordEnv: APP_PW}]"), null as "null".
// The environment's settings go through the file's schema and conversions (same messages, named
// by the variable); precedence is flags > environment > file > defaults.

import { createRequire } from 'node:module';
import { CONFIG_FILE_SCHEMA } from './schema.js';
import { convertSettings } from './file-config.js';

// yaml is required on first use (a flow list or mapping in a variable), not imported: see file-config.ts.
const require = createRequire(import.meta.url);
const parseYaml = (text: string): unknown => (require('yaml') as typeof import('yaml')).parse(text);

type Schema = Record<string, unknown>;

export interface EnvSetting {
  /** Path in the config file ("timeouts.commandMs"). */
  path: string;
  /** RESPOOL_TIMEOUTS_COMMAND_MS */
  name: string;
  schema: Schema;
}

/** "commandMs" → "COMMAND_MS", "hotKeys" → "HOT_KEYS". */
function snake(segment: string): string {
  return segment.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();
}

export function envName(path: string): string {
  return `RESPOOL_${path.split('.').map(snake).join('_')}`;
}

function typesOf(schema: Schema): string[] {
  const t = schema['type'];
  return Array.isArray(t) ? (t as string[]) : typeof t === 'string' ? [t] : [];
}

/** Every setting the environment can give: the schema's leaves (and mappings that also take a string, like admin). */
export function envSettings(): EnvSetting[] {
  const out: EnvSetting[] = [];
  const walk = (schema: Schema, path: string) => {
    const props = schema['properties'] as Record<string, Schema> | undefined;
    const types = typesOf(schema);
    if (props !== undefined && types.includes('object')) {
      if (path !== '' && types.some((t) => t !== 'object')) out.push({ path, name: envName(path), schema });
      for (const [k, s] of Object.entries(props)) walk(s, path === '' ? k : `${path}.${k}`);
      return;
    }
    out.push({ path, name: envName(path), schema });
  };
  walk(CONFIG_FILE_SCHEMA, '');
  return out;
}

/** One variable's text → the value the file would hold. */
function envValue(text: string, schema: Schema): unknown {
  const types = typesOf(schema);
  const trimmed = text.trim();
  if (types.includes('null') && (trimmed === 'null' || trimmed === '~')) return null;
  if (types.includes('array')) {
    if (trimmed.startsWith('[')) return parseYaml(trimmed) as unknown;
    return trimmed === '' ? [] : trimmed.split(',').map((s) => s.trim()).filter((s) => s !== '');
  }
  if (types.includes('integer') || types.includes('number')) {
    if (/^-?\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
    return types.includes('string') ? trimmed : text;
  }
  if (types.includes('boolean') && !types.includes('string')) {
    if (/^(true|on|yes|1)$/i.test(trimmed)) return true;
    if (/^(false|off|no|0)$/i.test(trimmed)) return false;
    return text;
  }
  if (types.includes('string')) return text; // passwords, addresses, names: as they are
  if (schema['enum'] !== undefined) return trimmed;
  return parseYaml(text) as unknown;
}

/**
 * The settings the environment gives, as a config-file-shaped object, and which variable set
 * which path (for messages). Variables that are not settings (RESPOOL_ZONE, RESPOOL_UPSTREAM_PASSWORD, ...) are ignored here.
 */
export function envConfigData(env: NodeJS.ProcessEnv): { data: Record<string, unknown>; names: Map<string, string> } {
  const data: Record<string, unknown> = {};
  const names = new Map<string, string>();
  // Longest paths last, so "admin" (a string) is set before "admin.token" turns it into a mapping.
  for (const s of envSettings().sort((a, b) => a.path.length - b.path.length)) {
    const text = env[s.name];
    if (text === undefined || text === '') continue;
    names.set(s.path, s.name);
    const keys = s.path.split('.');
    let at = data;
    for (let i = 0; i < keys.length - 1; i++) {
      const k = keys[i]!;
      const cur = at[k];
      // admin given as a string and admin.token: the mapping form { address, token }
      if (typeof cur === 'string') at[k] = { address: cur };
      else if (cur === undefined || cur === null || typeof cur !== 'object') at[k] = {};
      at = at[k] as Record<string, unknown>;
    }
    at[keys[keys.length - 1]!] = envValue(text, s.schema);
  }
  return { data, names };
}

/** "environment: timeouts.commandMs: must be…" → "environment variable RESPOOL_TIMEOUTS_COMMAND_MS (timeouts.commandMs): must be…". */
export function nameEnvProblem(problem: string, names: ReadonlyMap<string, string>): string {
  const m = /^environment: ([A-Za-z0-9_.[\]]+): (.*)$/s.exec(problem);
  if (m === null) return problem;
  const path = m[1]!.replace(/\[\d+\].*$/, '');
  const name = names.get(path) ?? names.get(path.split('.').slice(0, -1).join('.'));
  return name === undefined ? problem : `environment variable ${name} (${m[1]}): ${m[2]}`;
}

/** The --help lines: every variable and the setting it sets. */
export function envHelp(): string {
  return envSettings().map((s) => `  ${s.name.padEnd(48)} ${s.path}`).join('\n');
}

/** Settings from RESPOOL_<PATH> variables, through the file's schema and conversions; problems name the variable. */
export function readEnvironment(env: NodeJS.ProcessEnv, problems: string[]): Map<string, unknown> {
  const { data, names } = envConfigData(env);
  if (names.size === 0) return new Map();
  const own: string[] = [];
  const out = convertSettings(data, 'environment', env, own);
  for (const p of own) problems.push(nameEnvProblem(p, names));
  return out;
}
