import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/** What `--version` prints and `gateway_build_info` labels: the package version and the commit built. */
export interface BuildInfo {
  version: string;
  commit: string;
}

/** Our package.json's name and version, or undefined when `path` is none or another package's. */
function ownPackage(path: string): { version: string } | undefined {
  if (!existsSync(path)) return undefined;
  const manifest = JSON.parse(readFileSync(path, 'utf8')) as { name?: string; version?: string };
  return manifest.name === 'card-issuing-gateway' ? { version: manifest.version ?? 'unknown' } : undefined;
}

/** The repository (or image) root, the nearest folder up from this module with our package.json, and its version. */
function packageRoot(): { dir: string; version: string } | undefined {
  let dir = import.meta.dirname;
  for (let depth = 0; depth < 5; depth += 1) {
    const found = ownPackage(join(dir, 'package.json'));
    if (found) return { dir, version: found.version };
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
 * Reads the build info from disk: the version from package.json (read once), the commit from
 * GATEWAY_COMMIT (the image sets it at build), else from the checkout's .git (read as files: no
 * git binary needed), else `unknown`. The process uses {@link buildInfo}, which calls this once.
 */
export function readBuildInfo(env: Readonly<Record<string, string | undefined>> = process.env): BuildInfo {
  const root = packageRoot();
  const version = root?.version ?? 'unknown';
  let commit = env['GATEWAY_COMMIT'] || 'unknown';
  if (commit === 'unknown' && root) {
    try {
      commit = checkoutCommit(root.dir)?.slice(0, 12) ?? 'unknown';
    } catch {
      // not a checkout: unknown it is
    }
  }
  return { version, commit };
}

let cached: Readonly<BuildInfo> | undefined;

/**
 * This process's build info, read once (at the first call) and remembered: the files it comes
 * from describe the build the process runs, so reading them again could only go wrong (a
 * checkout moved on since the start would report a commit the process is not running).
 */
export function buildInfo(): Readonly<BuildInfo> {
  cached ??= Object.freeze(readBuildInfo());
  return cached;
}
