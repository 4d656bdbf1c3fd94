import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Gateway } from './app.js';
import { bindListener as bind } from './foundation/listen-error.js';

export { ListenError } from './foundation/listen-error.js';

/** Where each listener binds: the config's `listeners`, less what only the loader reads (`admin.exposed`). */
type Address = { readonly host: string; readonly port: number };
export interface ListenerAddresses {
  readonly https: Address;
  readonly plainHttp?: Address | undefined;
  readonly admin: Address;
  readonly connector?: Address | undefined;
}

export interface RunningGateway {
  readonly httpsUrl: string;
  readonly plainUrl: string | undefined;
  readonly adminUrl: string;
  /** The connector listener's (D64), when there is one. */
  readonly connectorUrl: string | undefined;
  /** Stops accepting, lets in-flight requests finish, then closes every listener (D22). */
  close(): Promise<void>;
}

const urlOf = (scheme: string, address: AddressInfo) => `${scheme}://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;

function listenPlain(server: Server, host: string, port: number): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/**
 * Opens the listeners the config names: the TLS API listener, the optional plain-HTTP
 * listener, the admin listener and the optional connector listener (D64). The plain listener feeds the same routing: requests on it
 * are refused with 403 "HTTPS is required" (D9) unless a trusted TLS-terminating proxy says,
 * with X-Forwarded-Proto, that the client spoke HTTPS to it.
 */
export async function listenGateway(gateway: Gateway, listeners: ListenerAddresses): Promise<RunningGateway> {
  await bind('https', listeners.https.host, listeners.https.port, () =>
    // Fastify cannot tell a serverFactory's TLS server from a plain one in its own log line.
    gateway.app.listen({
      host: listeners.https.host,
      port: listeners.https.port,
      listenTextResolver: (address) => `API listener (TLS) at ${address.replace(/^http:/, 'https:')}`,
    }),
  );
  const httpsUrl = urlOf('https', gateway.app.server.address() as AddressInfo);

  let plain: Server | undefined;
  let plainUrl: string | undefined;
  if (listeners.plainHttp) {
    plain = gateway.servers.plain(gateway.app.routing);
    const { host, port } = listeners.plainHttp;
    const server = plain;
    try {
      plainUrl = urlOf('http', await bind('plain HTTP', host, port, () => listenPlain(server, host, port)));
    } catch (error) {
      await gateway.app.close();
      throw error;
    }
  }

  try {
    await bind('admin', listeners.admin.host, listeners.admin.port, () => gateway.admin.listen({ host: listeners.admin.host, port: listeners.admin.port }));
  } catch (error) {
    plain?.close();
    await gateway.app.close();
    throw error;
  }
  const adminUrl = urlOf('http', gateway.admin.server.address() as AddressInfo);

  let connectorUrl: string | undefined;
  const { connectorListener } = gateway;
  if (connectorListener && listeners.connector) {
    const { host, port } = listeners.connector;
    try {
      await bind('connector', host, port, () => connectorListener.listen({ host, port, listenTextResolver: (address) => `connector listener (TLS) at ${address.replace(/^http:/, 'https:')}` }));
    } catch (error) {
      plain?.close();
      await gateway.app.close();
      await gateway.admin.close();
      throw error;
    }
    connectorUrl = urlOf('https', connectorListener.server.address() as AddressInfo);
  }

  let closing: Promise<void> | undefined;
  const close = async () => {
    const plainClosed = plain
      ? new Promise<void>((resolve) => {
          plain.close(() => resolve());
          plain.closeIdleConnections();
        })
      : Promise.resolve();
    // app.close() stops accepting, answers new requests on open sockets with 503 and waits
    // for in-flight ones; idle keep-alive sockets are closed at once (forceCloseConnections).
    await Promise.all([gateway.app.close(), plainClosed, connectorListener?.close()]);
    await gateway.admin.close();
  };
  return {
    httpsUrl,
    plainUrl,
    adminUrl,
    connectorUrl,
    close: () => (closing ??= close()),
  };
}
