import type { Logger } from 'pino';
import type { Credential, CredentialDirectory } from '../config/credentials-file.js';
import type { Clock } from '../foundation/clock.js';
import type { Outcomes, RequestContext, SessionsEndedCause } from '../observability/outcomes.js';
import type { NotBeforeStore } from '../store/store-types.js';

/** Besides start and reloads, the stored instants are read this often: a replica that missed a change learns it within this. */
const REFRESH_INTERVAL_MS = 30_000;
/** While the instants cannot be read or written, the next attempt comes this much later. */
const RETRY_INTERVAL_MS = 1_000;

/**
 * D41: sessions end with their credential's secret. Each credential has a "not before" instant
 * in the shared store, raised by the replica that sees the credential deactivated or its
 * `passwordHash` replaced (a reload), and read by every replica at start, on every reload and
 * every REFRESH_INTERVAL_MS. The instants are kept here, in memory, so the bearer guard checks
 * a token against them without a store round trip (the card path costs none more).
 *
 * An instant is only ever raised (by the store and here): a reactivation does not clear it, so
 * tokens and sessions from before a deactivation stay dead after the credential is active
 * again. And every instant a replica holds, the store holds (D61): each sync writes back, raise
 * only, every instant held here above the stored one, so a lost `cred-not-before` record (a
 * restore, a failover that lost the last writes) is repaired within one sync period by any
 * replica that still holds it, before a restarted replica could accept the tokens it revoked. The fingerprint that tokens and sessions carry ends them at a hash change even on a
 * replica that never saw the change (it was down); the instant covers the rest: a deactivation,
 * and a hash changed and changed back.
 *
 * Until the instants have been read once, `loaded` is false and the guard answers 503: a replica
 * that started while the store was away does not accept tokens it cannot judge.
 */
export class CredentialRevocations {
  readonly #instants = new Map<string, number>();
  /** Raised here, not yet written to the store (the write failed): written at the next sync. */
  readonly #unwritten = new Map<string, number>();
  #credentialIds: readonly string[] = [];
  #loaded = false;
  #failing = false;
  #syncing: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(private readonly deps: { store: NotBeforeStore; clock: Clock; outcomes: Outcomes; logger: Logger }) {}

  /** The instants have been read from the store at least once. */
  get loaded(): boolean {
    return this.#loaded;
  }

  /** `credentialId`'s not-before instant, epoch ms; 0 when it has none. */
  notBefore(credentialId: string): number {
    return this.#instants.get(credentialId) ?? 0;
  }

  /**
   * Whether an access token with these claims may still act for `credential`: issued under its
   * current secret, and not before its not-before instant (`iat` carries milliseconds).
   */
  accepts(credential: Credential, claims: { iat: number; secretFingerprint: string | undefined }): boolean {
    return claims.secretFingerprint === credential.secretFingerprint && Math.round(claims.iat * 1000) >= this.notBefore(credential.id);
  }

  /**
   * At start: a credential inactive now may have been deactivated while every replica was down,
   * so its instant is raised to now (harmless: it has no live session, and a later reactivation
   * comes after it). Then the instants are read; if the store cannot answer, retried until it does.
   */
  async start(credentials: CredentialDirectory): Promise<void> {
    this.#credentialIds = credentials.all().map((credential) => credential.id);
    const now = this.deps.clock.now();
    for (const credential of credentials.all()) if (!credential.active) this.#raise(credential.id, now);
    await this.sync();
  }

  /**
   * A reload (D22) applied `next` over `previous`: every credential deactivated, or given another
   * `passwordHash`, has its sessions ended now, on this replica at once and in the store for the
   * others; each is audited. Then the instants are read again. Synchronous up to the store work,
   * so the refusal applies from the next request on.
   */
  applied(previous: CredentialDirectory, next: CredentialDirectory, context: RequestContext): Promise<void> {
    const now = this.deps.clock.now();
    for (const credential of next.all()) {
      const before = previous.byId(credential.id);
      if (!before) continue;
      const causes: SessionsEndedCause[] = [];
      if (before.active && !credential.active) causes.push('deactivated');
      if (before.secretFingerprint !== credential.secretFingerprint) causes.push('password_changed');
      if (causes.length === 0) continue;
      this.#raise(credential.id, now);
      for (const cause of causes) this.deps.outcomes.record({ name: 'credential.sessions_ended', credential: credential.id, cause }, context);
    }
    this.#credentialIds = next.all().map((credential) => credential.id);
    return this.sync();
  }

  /**
   * Writes what is unwritten, reads every instant, and writes back every instant held here that
   * the store has lower or not at all (D61); one at a time (a second call waits for the running
   * one, then runs).
   */
  async sync(): Promise<void> {
    while (this.#syncing) await this.#syncing;
    this.#syncing = this.#syncOnce().finally(() => {
      this.#syncing = undefined;
    });
    return this.#syncing;
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  #raise(credentialId: string, at: number): void {
    this.#instants.set(credentialId, Math.max(at, this.notBefore(credentialId)));
    this.#unwritten.set(credentialId, Math.max(at, this.#unwritten.get(credentialId) ?? 0));
  }

  async #syncOnce(): Promise<void> {
    if (this.#closed) return;
    const { store, logger } = this.deps;
    try {
      for (const [credentialId, at] of [...this.#unwritten]) {
        const stored = await store.raise(credentialId, at);
        if (this.#unwritten.get(credentialId) === at) this.#unwritten.delete(credentialId);
        this.#instants.set(credentialId, Math.max(stored, this.notBefore(credentialId)));
      }
      const stored = await store.read(this.#credentialIds);
      for (const [credentialId, at] of stored) this.#instants.set(credentialId, Math.max(at, this.notBefore(credentialId)));
      // The store lost what this replica knows: written back, never lowering what is there.
      for (const credentialId of this.#credentialIds) {
        const held = this.notBefore(credentialId);
        const had = stored.get(credentialId) ?? 0;
        if (held <= had) continue;
        const now = await store.raise(credentialId, held);
        this.#instants.set(credentialId, Math.max(now, held));
        logger.warn(
          { credential: credentialId, stored: had === 0 ? null : new Date(had).toISOString(), written: new Date(held).toISOString() },
          'credential not-before instant missing or older in the store; written back from this replica',
        );
      }
      this.#loaded = true;
      if (this.#failing) logger.info('credential not-before instants read and written again');
      this.#failing = false;
      this.#schedule(REFRESH_INTERVAL_MS);
    } catch (error) {
      // One line per change of state, not per attempt.
      if (!this.#failing) {
        logger.warn(
          { problem: (error as Error).message, loaded: this.#loaded, unwritten: this.#unwritten.size },
          this.#loaded
            ? 'credential not-before instants could not be synced with the store; retrying'
            : 'credential not-before instants could not be read; bearer requests answer 503 until they are',
        );
      }
      this.#failing = true;
      this.#schedule(RETRY_INTERVAL_MS);
    }
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.sync(), ms);
    this.#timer.unref();
  }
}
