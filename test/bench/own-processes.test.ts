import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { killOwnProcesses, ownProcess } from '../../bench/own-processes.js';

/**
 * A bench run never leaves a process behind (bench/own-processes.ts): every process it starts
 * is owned, and whatever is still running when it exits is killed. Real child processes.
 */

const sleeper = (): ChildProcess => spawn('sleep', ['600'], { stdio: 'ignore' });

describe('owned processes', () => {
  it('are all killed, and only those still running are counted', async () => {
    const [a, b, done] = [sleeper(), { child: sleeper() }, sleeper()];
    await Promise.all([once(a, 'spawn'), once(b.child, 'spawn'), once(done, 'spawn')]);
    expect(ownProcess(a)).toBe(a);
    expect(ownProcess(b)).toBe(b);
    ownProcess(done);
    done.kill('SIGTERM');
    await once(done, 'exit');
    const exits = [once(a, 'exit'), once(b.child, 'exit')];
    expect(killOwnProcesses()).toBe(2);
    expect((await Promise.all(exits)).map(([, signal]) => signal)).toEqual(['SIGKILL', 'SIGKILL']);
    expect(killOwnProcesses()).toBe(0);
  });

  it('leaves alone a process it does not own', async () => {
    const stranger = sleeper();
    await once(stranger, 'spawn');
    expect(killOwnProcesses()).toBe(0);
    expect(stranger.exitCode).toBeNull();
    stranger.kill('SIGKILL');
    await once(stranger, 'exit');
  });
});
