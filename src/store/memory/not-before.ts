import type { NotBeforeStore } from '../store-types.js';

/** D41: credentials' not-before instants in the process; raised, never lowered. */
export class MemoryNotBefore implements NotBeforeStore {
  readonly instants = new Map<string, number>();

  async raise(credentialId: string, at: number): Promise<number> {
    const stored = Math.max(at, this.instants.get(credentialId) ?? 0);
    this.instants.set(credentialId, stored);
    return stored;
  }

  async read(credentialIds: readonly string[]): Promise<Map<string, number>> {
    const found = new Map<string, number>();
    for (const id of credentialIds) {
      const at = this.instants.get(id);
      if (at !== undefined) found.set(id, at);
    }
    return found;
  }
}
