import { spawnSync } from 'node:child_process';

export interface CommandResult {
  status: number | null;
  output: string;
}

/**
 * Runs promtool (Debian's `prometheus` package; `.ci/run` installs it before
 * `npm run check:deploy`). A missing promtool fails the check with how to install it, never
 * skips it: a skipped check would let broken alert rules through.
 */
export function promtool(args: readonly string[], options: { cwd?: string; input?: string } = {}): CommandResult {
  const result = spawnSync('promtool', [...args], { cwd: options.cwd, input: options.input, encoding: 'utf8', timeout: 60_000 });
  if (result.error) {
    if ((result.error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error('promtool is not installed: `apt-get install -y --no-install-recommends prometheus` (Debian) provides it; .ci/run installs it');
    }
    throw result.error;
  }
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}
