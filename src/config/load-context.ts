import { createHash, type Hash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ConfigError } from './config-error.js';
import type { ConfigFile, SecretRef } from './config-schema.js';
import type { Environment } from './config-types.js';
import type { SecretFileMode } from './production-guards.js';

/** What one section found wrong (it stops the start) and what it tolerates but says (warnings). */
export class Problems {
  readonly problems: string[] = [];
  readonly warnings: string[] = [];

  constructor(readonly file: string) {}

  /** A problem of `field`; `file` when it is in another file than the config (the credentials file). */
  add(field: string, problem: string, file = this.file): void {
    this.problems.push(`${file}: ${field}: ${problem}`);
  }

  warn(field: string, problem: string, file = this.file): void {
    this.warnings.push(`${file}: ${field}: ${problem}`);
  }

  /** Runs `work`, turning a thrown error into a problem on `field` (a ConfigError's lines as they are). */
  async capture<T>(field: string, work: () => T | Promise<T>): Promise<T | undefined> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof ConfigError) this.problems.push(...error.problems);
      else this.add(field, (error as Error).message);
      return undefined;
    }
  }
}

/**
 * `private`: a key or secret, whose file production refuses when group or others can read it
 * (D32); `public`: a certificate or public key.
 */
export type SecretKind = 'private' | 'public';

/** The top-level section a dotted field is in: `connector.tls.key` -> `connector`. */
const sectionOf = (field: string): string => field.split(/[.[]/)[0] ?? field;

/** Reads secret references for every section of one load, and remembers what it read. */
export class SecretReader {
  /** Private files read, with their permission bits (D32). */
  readonly privateFiles: SecretFileMode[] = [];
  /**
   * Per section, a hash of the bytes its secrets read: a certificate or key rotated in place
   * (same path) is a change of its section, which a reload then names as restart-only.
   */
  readonly #bytes = new Map<string, Hash>();

  constructor(
    readonly baseDir: string,
    readonly env: Environment,
  ) {}

  /** Where a reference points, for messages: the resolved file, or the environment variable. */
  where(ref: SecretRef): string {
    return ref.env !== undefined ? `environment variable ${ref.env}` : resolve(this.baseDir, ref.file ?? '');
  }

  /** The secret's bytes, or undefined with the reason added to `problems`; nothing for an absent reference. */
  async read(field: string, ref: SecretRef | undefined, kind: SecretKind, problems: Problems): Promise<Buffer | undefined> {
    if (ref === undefined) return undefined;
    const bytes = await problems.capture(field, () => this.#read(field, ref, kind));
    if (bytes) {
      const section = sectionOf(field);
      const hash = this.#bytes.get(section) ?? createHash('sha256');
      this.#bytes.set(section, hash.update(`${field}\0${bytes.length}\0`).update(bytes));
    }
    return bytes;
  }

  /** The digest of the secret bytes `section` read, if it read any. */
  digest(section: string): Buffer | undefined {
    return this.#bytes.get(section)?.copy().digest();
  }

  async #read(field: string, ref: SecretRef, kind: SecretKind): Promise<Buffer> {
    if (ref.env !== undefined) {
      const value = this.env[ref.env];
      if (value === undefined || value === '') throw new Error(`environment variable ${ref.env} is not set`);
      return Buffer.from(value, 'utf8');
    }
    const path = resolve(this.baseDir, ref.file ?? '');
    try {
      const content = await readFile(path);
      if (kind === 'private') this.privateFiles.push({ field, path, mode: (await stat(path)).mode });
      return content;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw new Error(code === 'ENOENT' ? `file ${path} not found` : `file ${path} cannot be read (${code ?? 'error'})`, { cause: error });
    }
  }
}

/** What a section loader is handed beside its raw section. */
export interface SectionContext {
  readonly baseDir: string;
  /** Now, Unix milliseconds: certificates are judged against it (D51). */
  readonly now: number;
  /** The file's environment, when the schema accepts it: production refuses what others warn about. */
  readonly environment: ConfigFile['environment'] | undefined;
  /** Whether production refuses an expired certificate (a start or a check) or warns (a reload, D51). */
  readonly refuseExpired: boolean;
  readonly problems: Problems;
  /** Reads a secret reference (absent: undefined, no problem), adding its problem to this section's. */
  secret(field: string, ref: SecretRef | undefined, kind: SecretKind): Promise<Buffer | undefined>;
  where(ref: SecretRef): string;
}

/**
 * Turns one of a section's findings into a problem in production and a warning elsewhere (D32,
 * D51); with no well-formed environment it is a warning (the environment's own problem stops
 * the start).
 */
export function refuseInProduction(context: SectionContext, field: string, problem: string, reason: string, file?: string): void {
  if (context.environment === 'production') context.problems.add(field, `${problem} (${reason})`, file);
  else context.problems.warn(field, problem, file);
}

/** A section's loader: its raw part of the file in, its value out (none when it found a problem). */
export type SectionLoader<T> = (raw: unknown, context: SectionContext) => Promise<T | undefined>;

/**
 * One load of a config file: every section runs, whatever the others found, and their problems
 * and warnings are gathered in the order the sections ran (after the schema's), so that one
 * pass names them all (D40, D52).
 */
export class LoadRun {
  readonly problems: string[];
  readonly warnings: string[] = [];

  constructor(
    readonly file: string,
    readonly secrets: SecretReader,
    readonly settings: Pick<SectionContext, 'now' | 'environment' | 'refuseExpired'>,
    schemaProblems: readonly string[],
  ) {
    this.problems = [...schemaProblems];
  }

  /** Runs one section's loader on its part of the file: its value stands only if it found no problem. */
  readonly section = async <T>(load: SectionLoader<T>, raw: unknown): Promise<T | undefined> => {
    const problems = new Problems(this.file);
    const { secrets } = this;
    const value = await load(raw, {
      ...this.settings,
      baseDir: secrets.baseDir,
      problems,
      secret: (field, ref, kind) => secrets.read(field, ref, kind, problems),
      where: (ref) => secrets.where(ref),
    });
    this.problems.push(...problems.problems);
    this.warnings.push(...problems.warnings);
    return problems.problems.length === 0 ? value : undefined;
  };
}
