/** The loopback port finder shared with the benchmark (tools/launch/). */
export { freePort } from '../../tools/launch/ports.js';
