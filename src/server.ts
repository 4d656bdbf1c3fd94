import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Gateway } from './app.js';
import type { GatewayConfig } from './config/load-config.js';

export interface RunningGateway {
  readonly httpsUrl: string;
  readonly plainUrl: string | undefined;
  readonly adminUrl: string;
  /** Stops accepting, lets in-flight requests finish, then closes every listener (D22). */
  close(): Promise<void>;
}

const urlOf = (scheme: string, address: AddressInfo) =>
  `${scheme}://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;

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
 * listener and the admin listener. The plain listener feeds the same routing: requests on it
 * are refused with 403 "HTTPS is required" (D9) unless a trusted TLS-terminating proxy says,
 * with X-Forwarded-Proto, that the client spoke HTTPS to it.
 */
export async function listenGateway(gateway: Gateway, listeners: GatewayConfig['listeners']): Promise<RunningGateway> {
  await gateway.app.listen({ host: listeners.https.host, port: listeners.https.port });
  const httpsUrl = urlOf('https', gateway.app.server.address() as AddressInfo);

  let plain: Server | undefined;
  let plainUrl: string | undefined;
  if (listeners.plainHttp) {
    plain = createServer({ requestTimeout: 30_000 }, gateway.app.routing);
    plainUrl = urlOf('http', await listenPlain(plain, listeners.plainHttp.host, listeners.plainHttp.port));
  }

  await gateway.admin.listen({ host: listeners.admin.host, port: listeners.admin.port });
  const adminUrl = urlOf('http', gateway.admin.server.address() as AddressInfo);

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
    await Promise.all([gateway.app.close(), plainClosed]);
    await gateway.admin.close();
  };
  return {
    httpsUrl,
    plainUrl,
    adminUrl,
    close: () => (closing ??= close()),
  };
}
