import { verifyPassword, type ParsedHash } from '../foundation/password-hash.js';

/**
 * Bounds concurrent password hashing (D27). scrypt runs on libuv's thread pool (4 threads by
 * default); more hashes than that only queue, and a flood of logins would then make every
 * legitimate login wait behind it. Past the cap a login is refused at once (503), and one
 * source may hold only part of the capacity, so a single address cannot take all of it.
 */
export class PasswordHashGate {
  #inFlight = 0;
  #admitted = 0;
  readonly #perSource = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly maxPerSource: number,
  ) {}

  /**
   * Password hashes run since the gate was built. The gate runs each one itself (`tryVerify`), so
   * a login that skipped its hash (an unknown username without the dummy hash) is not counted:
   * tests count this instead of timing logins.
   */
  get admitted(): number {
    return this.#admitted;
  }

  /**
   * Verifies `password` against `stored` when a hash may start now for `source`; undefined when
   * the cap is reached (nothing runs then).
   */
  tryVerify(source: string, password: string, stored: ParsedHash): Promise<boolean> | undefined {
    const release = this.#tryAcquire(source);
    if (!release) return undefined;
    this.#admitted += 1;
    return verifyPassword(password, stored).finally(release);
  }

  #tryAcquire(source: string): (() => void) | undefined {
    const held = this.#perSource.get(source) ?? 0;
    if (this.#inFlight >= this.max || held >= this.maxPerSource) return undefined;
    this.#inFlight += 1;
    this.#perSource.set(source, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inFlight -= 1;
      const left = (this.#perSource.get(source) ?? 1) - 1;
      if (left === 0) this.#perSource.delete(source);
      else this.#perSource.set(source, left);
    };
  }
}
