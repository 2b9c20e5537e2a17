// The fault relay lives with the harness (test/harness/fault-relay.ts) so that bench/ can use its build (build/harness/fault-relay.js).
export { FaultRelay, type FaultSettings } from '../harness/fault-relay.js';
