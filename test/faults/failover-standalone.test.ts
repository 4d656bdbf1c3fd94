import { describe, expect, it } from 'vitest';
import { startStandalone } from '../support/redis-topologies.js';
import { describeFailover, IN_FLIGHT_SLACK_MS, orphanConflicts, recoveryTimes, type Answer } from './failover-load.js';

/**
 * Issue 10: what users of a single Redis get. The same load as the Sentinel and Cluster runs;
 * the server is SIGKILLed and a new, empty one (no persistence, as the tests run it) starts on
 * the same port 2 s later, as a process supervisor would. Sessions are gone with the data:
 * refresh clients get 401 and log in again.
 */
describeFailover('single Redis: killed under load and restarted empty', startStandalone, (standalone) => ({
  async fault() {
    await standalone.server.kill();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await standalone.server.start();
  },
  async after(_report, replicas) {
    for (const store of replicas.stores)
      expect(store.describe()).toMatchObject({ topology: 'standalone', up: true, masters: [standalone.server.address], masterChanges: 0 });
  },
}));

/**
 * The failover runs' own checks, on made-up timelines: what the orphaned claim of issue 10
 * looks like to a client (503 at the kill, then 409s with nothing in flight until the claim's
 * lease of 6.5 s ends) must fail them; duplicates waiting on a live claim must not.
 */
describe('failover load checks', () => {
  const card = (requestId: string, status: number, sentAt: number, doneAt: number): Answer => ({
    kind: 'card',
    requestId,
    status,
    gateway: 0,
    sentAt,
    doneAt,
    ms: doneAt - sentAt,
  });

  it('flags a 409 answered with nothing of its requestId in flight, and the lease-long wait behind it', () => {
    const orphaned = [
      // The claim's reply was lost at the kill: 503 after the 300 ms command timeout, three copies.
      card('a', 503, 0, 300),
      card('a', 503, 0, 301),
      card('a', 503, 0, 302),
      // Retries after recovery wait 2.5 s on the dead claim and all get 409 together.
      card('a', 409, 2_600, 5_100),
      card('a', 409, 2_600, 5_101),
      card('a', 409, 2_600, 5_100),
      // The lease ends 6.5 s after the claim: the next retry gets the card.
      card('a', 201, 5_350, 6_520),
      card('a', 201, 5_350, 6_521),
      card('a', 201, 5_350, 6_522),
    ];
    expect(orphanConflicts(orphaned)).toHaveLength(3);
    // The lease-long wait behind them: from the first 503 (300) to the last 201 (6 522).
    expect(recoveryTimes(orphaned).get('a')).toBe(6_222);
    // An owner that answered just before the waiters looked for the last time does not excuse them.
    expect(orphanConflicts([...orphaned, card('a', 201, 2_600, 5_100 - IN_FLIGHT_SLACK_MS - 5)])).toHaveLength(3);
  });

  it('accepts a 409 given while another copy of its requestId is being answered, and a quick retry after a 503', () => {
    const live = [
      // One replica forwards slowly; the other's duplicates wait 2.5 s and get 409 meanwhile.
      card('b', 201, 0, 2_700),
      card('b', 409, 0, 2_500),
      card('b', 409, 0, 2_500),
      // The owner answered between the waiter's last look and its 409: within the slack.
      card('c', 201, 0, 2_490),
      card('c', 409, 0, 2_500),
      // 503 at the kill, card after the outage.
      card('d', 503, 10, 40),
      card('d', 201, 2_300, 2_350),
      // A 201 in the same attempt as the 503 (the card was made before the kill).
      card('e', 201, 0, 20),
      card('e', 503, 0, 320),
    ];
    expect(orphanConflicts(live)).toEqual([]);
    expect(recoveryTimes(live)).toEqual(
      new Map([
        ['d', 2_310],
        ['e', 0],
      ]),
    );
  });
});
