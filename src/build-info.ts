import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** What `--version` prints and `gateway_build_info` labels: the package version and the commit built. */
export interface BuildInfo {
  version: string;
  commit: string;
}

/** The repository (or image) root: the nearest folder up from this module with our package.json. */
function packageRoot(): string | undefined {
  let dir = import.meta.dirname;
  for (let depth = 0; depth < 5; depth += 1) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate) && (JSON.parse(readFileSync(candidate, 'utf8')) as { name?: string }).name === 'card-issuing-gateway') return dir;
    dir = dirname(dir);
  }
  return undefined;
}

/**
 * The commit a checkout's HEAD names, read as files (no git binary needed): `.git` may be a
 * folder or, in a linked worktree or a submodule, a file saying `gitdir: PATH`; a branch may be
 * a loose ref or only in `packed-refs` (of the common folder, for a worktree).
 */
function checkoutCommit(root: string): string | undefined {
  const dotGit = join(root, '.git');
  let gitDir = dotGit;
  if (!statSync(dotGit).isDirectory()) {
    const pointer = /^gitdir: (.+)$/m.exec(readFileSync(dotGit, 'utf8'))?.[1];
    if (!pointer) return undefined;
    gitDir = resolve(root, pointer.trim());
  }
  const commonFile = join(gitDir, 'commondir');
  const commonDir = existsSync(commonFile) ? resolve(gitDir, readFileSync(commonFile, 'utf8').trim()) : gitDir;
  const head = readFileSync(join(gitDir, 'HEAD'), 'utf8').trim();
  const ref = /^ref: (.+)$/.exec(head)?.[1];
  if (!ref) return head;
  for (const dir of [gitDir, commonDir]) {
    if (existsSync(join(dir, ref))) return readFileSync(join(dir, ref), 'utf8').trim();
  }
  const packed = join(commonDir, 'packed-refs');
  if (!existsSync(packed)) return undefined;
  for (const line of readFileSync(packed, 'utf8').split('\n')) {
    const [sha, name] = line.split(' ');
    if (name === ref && sha && /^[0-9a-f]{40,64}$/.test(sha)) return sha;
  }
  return undefined;
}

/**
 * Read once at start. The commit comes from GATEWAY_COMMIT (the image sets it at build), else
 * from the checkout's .git (read as files: no git binary needed), else `unknown`.
 */
export function readBuildInfo(env: Readonly<Record<string, string | undefined>> = process.env): BuildInfo {
  const root = packageRoot();
  const version = root ? ((JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown') : 'unknown';
  let commit = env['GATEWAY_COMMIT'] || 'unknown';
  if (commit === 'unknown' && root) {
    try {
      commit = checkoutCommit(root)?.slice(0, 12) ?? 'unknown';
    } catch {
      // not a checkout: unknown it is
    }
  }
  return { version, commit };
}
