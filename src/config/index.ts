// The public face of src/config: import from here.
export { parseCommandLine, type CommandLineResult } from './load-config.js';
export { ConfigError, type HostPort, type LogLevel, type Mode, type RespoolConfig } from './types.js';
export { DEFAULT_CONFIG } from './defaults.js';
export { formatHostPort, formatSize, formatDuration } from './values.js';
