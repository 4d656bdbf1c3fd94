import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { repoPath } from './support.js';

/**
 * The runbooks an operator needs on day two are in the repository. Their links and anchors are
 * checked with every other document's by test/docs/self-contained.test.ts.
 */
describe('operator documentation', () => {
  it('has the runbooks the operators need', () => {
    const missing = [
      'deploy/README.md',
      'docs/runbooks/README.md',
      'docs/runbooks/alerts.md',
      'docs/runbooks/connector-outage.md',
      'docs/runbooks/credentials.md',
      'docs/runbooks/rotate-card-record-key.md',
      'docs/runbooks/rotate-signing-key.md',
      'docs/runbooks/rotate-tls-certificate.md',
      'docs/runbooks/shutdown-and-rollout.md',
      'docs/runbooks/store-outage.md',
    ].filter((path) => !existsSync(repoPath(path)));
    expect(missing).toEqual([]);
  });
});
