import type { SandboxMode } from './sandbox-types.js';

/** The mode in force, as `POST /__control/mode` set it. */
export interface ModeState {
  mode: SandboxMode;
  delayMs: number;
  status: number;
  /** Requests left before falling back to `normal`; undefined = until changed. */
  remaining: number | undefined;
}

export interface ModeSetting {
  mode: SandboxMode;
  delayMs?: number;
  status?: number;
  count?: number;
}

const DEFAULT_DELAY_MS = 1000;
const DEFAULT_FAIL_STATUS = 500;
const NORMAL: ModeState = { mode: 'normal', delayMs: 0, status: DEFAULT_FAIL_STATUS, remaining: undefined };

/** The fault mode: every `/v1/cards` request (creation or lifecycle) takes one turn of its count. */
export class SandboxModes {
  private state: ModeState = NORMAL;

  get current(): SandboxMode {
    return this.state.mode;
  }

  set({ mode, delayMs, status, count }: ModeSetting): void {
    this.state = mode === 'normal' ? NORMAL : { mode, delayMs: delayMs ?? DEFAULT_DELAY_MS, status: status ?? DEFAULT_FAIL_STATUS, remaining: count };
  }

  /** The mode for this request; a counted mode falls back to normal after its last request. */
  take(): ModeState {
    const current = this.state;
    if (current.remaining !== undefined) {
      const remaining = current.remaining - 1;
      this.state = remaining > 0 ? { ...current, remaining } : NORMAL;
    }
    return current;
  }

  reset(): void {
    this.state = NORMAL;
  }
}
