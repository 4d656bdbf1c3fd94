/** A listener could not bind: one line an operator can act on (D40), never a stack trace. */
export class ListenError extends Error {
  constructor(listener: string, host: string, port: number, cause: NodeJS.ErrnoException) {
    const reason =
      cause.code === 'EADDRINUSE'
        ? 'address already in use'
        : cause.code === 'EACCES'
          ? 'permission denied'
          : cause.code === 'EADDRNOTAVAIL'
            ? 'address not available on this host'
            : (cause.code ?? cause.message);
    super(`cannot listen on ${host}:${port} (${listener} listener): ${reason}`, { cause });
    this.name = 'ListenError';
  }
}

/** Binds one listener, turning a bind failure into a ListenError naming it (the gateway's listeners, the sandbox connector). */
export async function bindListener<T>(listener: string, host: string, port: number, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND')
      throw new ListenError(listener, host, port, error as NodeJS.ErrnoException);
    throw error;
  }
}
