/** The PING probe shared with the benchmark's Redis launcher (tools/launch/). */
export { answersPing } from '../../tools/launch/redis-ping.js';
