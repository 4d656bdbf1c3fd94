import { describe, expect, it } from 'vitest';
import { launch } from '../../tools/launch/child-process.js';

/**
 * The launcher the tests and the benchmark share (tools/launch/child-process.ts), on real Node
 * child processes: the JSON-line wait, its failure when the process ends first, a stdin request
 * answered on stdout (the benchmark's `cpu` line), a command prefix (the benchmark's taskset
 * pinning) and the signal that stops a server.
 */

const GUARD = 60_000;
const node = (script: string) => [process.execPath, ['-e', script]] as const;

describe('launch', () => {
  it('collects stdout in lines and finds the first matching JSON line from an index', async () => {
    const [command, args] = node(`
      console.log('not json');
      console.log(JSON.stringify({ step: 1 }));
      console.log(JSON.stringify({ step: 2 }));
      console.error('on stderr');
    `);
    const running = launch(command, args);
    expect(await running.untilJsonLine((line) => typeof line['step'] === 'number', { guardMs: GUARD })).toEqual({ step: 1 });
    expect(await running.untilJsonLine((line) => typeof line['step'] === 'number', { from: 2, guardMs: GUARD })).toEqual({ step: 2 });
    await running.closed;
    expect(running.lines).toEqual(['not json', '{"step":1}', '{"step":2}']);
    expect(running.stderr()).toBe('on stderr\n');
    expect(await running.exited).toEqual({ code: 0, signal: null });
    expect(running.hasExited()).toBe(true);
  });

  it('fails the wait, naming what it awaited, when the process ends without the line', async () => {
    const [command, args] = node(`console.log(JSON.stringify({ ready: false })); process.exit(3);`);
    const running = launch(command, args);
    await expect(running.untilJsonLine((line) => line['ready'] === true, { guardMs: GUARD, what: 'the ready line' })).rejects.toThrow(
      /the process exited before the ready line; stdout:\n\{"ready":false\}/,
    );
    expect((await running.exited).code).toBe(3);
  });

  it('answers a request written to a piped stdin, and stops on the signal it is given', async () => {
    // The shape of bench/serve.ts: ready, then one JSON answer per `cpu` line, until SIGTERM.
    const [command, args] = node(`
      process.stdin.setEncoding('utf8');
      process.stdin.on('data', (text) => { if (text.includes('cpu')) console.log(JSON.stringify({ cpu: { user: 1, system: 2 } })); });
      process.on('SIGTERM', () => process.exit(0));
      console.log(JSON.stringify({ ready: true }));
    `);
    const running = launch(command, args, { stdin: 'pipe' });
    const answers: unknown[] = [];
    running.onJsonLine((line) => {
      if (line['cpu']) answers.push(line['cpu']);
    });
    await running.untilJsonLine((line) => line['ready'] === true, { guardMs: GUARD });
    running.child.stdin!.write('cpu\n');
    await running.untilJsonLine((line) => line['cpu'] !== undefined, { guardMs: GUARD });
    expect(answers).toEqual([{ user: 1, system: 2 }]);
    expect(await running.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    // A second stop of an exited process sends nothing and gives the same exit.
    expect(await running.stop()).toEqual({ code: 0, signal: null });
  });

  it("runs the command behind a prefix that execs it, so the pid is the command's", async () => {
    const [command, args] = node(`console.log(JSON.stringify({ pid: process.pid, marked: process.env.LAUNCH_PREFIX_MARK }));`);
    const running = launch(command, args, { prefix: ['env', 'LAUNCH_PREFIX_MARK=yes'] });
    const line = await running.untilJsonLine((candidate) => 'pid' in candidate, { guardMs: GUARD });
    expect(line).toEqual({ pid: running.pid, marked: 'yes' });
    await running.closed;
  });

  it('fails exitWithin as hung while the process runs, then SIGKILLs it by default', async () => {
    const [command, args] = node(`setInterval(() => {}, 1000);`);
    const running = launch(command, args);
    await expect(running.exitWithin(50)).rejects.toThrow(/^hung: still running after 50 ms/);
    expect(running.hasExited()).toBe(false);
    expect(await running.stop()).toEqual({ code: null, signal: 'SIGKILL' });
  });
});
