import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * client/dist is rebuilt from scratch by the README's build command and by `npm pack` (its
 * prepack), and vitest runs test files in parallel: a file that builds it and uses what it built
 * holds this lock meanwhile, so it never reads a dist another file is deleting or writing. The
 * lock is a folder holding its owner's pid, one per checkout; one whose owner is gone is taken over.
 */

export const CLIENT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const LOCK = join(tmpdir(), `card-gateway-client-dist-${createHash('sha256').update(CLIENT_ROOT).digest('hex').slice(0, 12)}.lock`);

function ownerAlive(): boolean {
  try {
    process.kill(Number(readFileSync(join(LOCK, 'pid'), 'utf8')), 0);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // EPERM: alive, another user's. ENOENT: no pid file yet, its owner between mkdir and write
    // (unless that was long ago), or the lock gone meanwhile.
    if (code === 'ENOENT') {
      try {
        return Date.now() - statSync(LOCK).mtimeMs < 10_000;
      } catch {
        return false;
      }
    }
    return code === 'EPERM';
  }
}

export async function withClientDist<T>(use: () => Promise<T>, waitMs = 240_000): Promise<T> {
  const giveUpAt = Date.now() + waitMs;
  for (;;) {
    try {
      mkdirSync(LOCK);
      writeFileSync(join(LOCK, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (!ownerAlive()) rmSync(LOCK, { recursive: true, force: true });
    else if (Date.now() > giveUpAt) throw new Error(`client/dist stayed locked by another test file for ${waitMs} ms (${LOCK})`);
    else await new Promise((resolve) => setTimeout(resolve, 200));
  }
  try {
    return await use();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}
