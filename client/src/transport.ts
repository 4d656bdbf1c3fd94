/**
 * The one thing the client needs from an HTTP stack: send a request (GET, or POST/PATCH with a
 * JSON text), read status, headers and body text. Node's global `fetch` does this; with a custom CA (the sandbox's self-signed
 * certificate) undici's own `fetch` and `Agent` are used together, because Node 20's built-in
 * fetch bundles an older undici and handing it a dispatcher from the npm undici v7 is not a
 * supported combination (their dispatcher interfaces have drifted between majors).
 */

export interface HttpResponseLike {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  text(): Promise<string>;
}

export interface HttpRequestInit {
  method: 'GET' | 'POST' | 'PATCH';
  headers: Record<string, string>;
  /** The JSON text of a POST or PATCH; absent for a GET. */
  body?: string | undefined;
  signal: AbortSignal;
}

/** A `fetch`-compatible function; the global `fetch` and undici's `fetch` both fit. */
export type FetchLike = (url: string, init: HttpRequestInit) => Promise<HttpResponseLike>;

/** PEM text of the certificate(s) to trust, as a string, a Buffer or a list of them. */
export type CaOption = string | Uint8Array | readonly (string | Uint8Array)[];

export interface Transport {
  fetch: FetchLike;
  /** Closes pooled connections the transport opened (none for the global fetch). */
  close(): Promise<void>;
}

function pemList(ca: CaOption): string[] {
  const decoder = new TextDecoder();
  const one = (entry: string | Uint8Array): string => (typeof entry === 'string' ? entry : decoder.decode(entry));
  return typeof ca === 'string' || ca instanceof Uint8Array ? [one(ca)] : ca.map(one);
}

export async function createTransport(options: { ca?: CaOption | undefined; fetch?: FetchLike | undefined }): Promise<Transport> {
  if (options.fetch) return { fetch: options.fetch, close: async () => undefined };
  if (options.ca === undefined) return { fetch: (url, init) => globalThis.fetch(url, init), close: async () => undefined };
  // Loaded only when a CA is given, so the client needs nothing beyond Node otherwise.
  const undici = await import('undici');
  // `ca` replaces the default trust store for this agent: only the given certificates are trusted.
  const agent = new undici.Agent({ connect: { ca: pemList(options.ca) } });
  return {
    fetch: (url, init) => undici.fetch(url, { ...init, dispatcher: agent }),
    close: () => agent.close(),
  };
}
