import { readFileSync } from 'node:fs';
import { CardGatewayClient, CardGatewayError, SessionEndedError } from '@card-gateway/client';

// Defaults fit `npm start` in the repository root: the local gateway, its self-signed
// certificate, and the local demo credential.
const client = new CardGatewayClient({
  baseUrl: process.env.GATEWAY_URL ?? 'https://127.0.0.1:8443',
  ca: readFileSync(process.env.GATEWAY_CA_FILE ?? 'config/.local/tls.crt'),
  // Persist rotated tokens here if the process may restart (the old refresh token dies 60 s
  // after its first use); this program only shows that it happens.
  onSessionChange: (session) => console.log(session ? 'session tokens updated' : 'session ended'),
});

try {
  await client.login(process.env.GATEWAY_USERNAME ?? 'demo', process.env.GATEWAY_PASSWORD ?? 'local-demo-password');

  // The requestId is generated and reused on every retry, so this never creates two cards.
  const created = await client.createCard({
    cardLimit: 10_000,
    currency: 'EUR',
    config: { expiryDuration: 12, tolerance: { percentage: 5 } },
    metadata: { card_name: 'Trip to Lisbon' },
  });
  console.log(`created ${created.card.cardId}: ${created.card.pan}, limit ${created.card.cardLimit} ${created.card.currency}`);

  // Same requestId again, asking for the full details: the gateway replays the same card.
  const revealed = await client.createCard(
    {
      requestId: created.requestId,
      cardLimit: 10_000,
      currency: 'EUR',
      config: { expiryDuration: 12, tolerance: { percentage: 5 } },
      metadata: { card_name: 'Trip to Lisbon' },
    },
    { revealDetails: true },
  );
  console.log(
    `revealed ${revealed.card.cardId} (replayed: ${revealed.replayed}): PAN ending ${revealed.card.pan.slice(-4)}, expires ${revealed.card.expMonth}/${revealed.card.expYear}`,
  );

  await client.logout();
} catch (error) {
  if (error instanceof SessionEndedError) {
    console.error(`session ended (${error.reason}, ${error.gatewayCode ?? 'no gateway code'}): ${error.message}`);
  } else if (error instanceof CardGatewayError) {
    // `code` is stable; quote `correlationId` to support. A retryable error with a requestId can
    // be finished later by calling createCard again with that requestId.
    console.error(
      `failed: ${error.code} (status ${error.status ?? 'none'}, retryable ${error.retryable}, correlationId ${error.correlationId ?? 'none'}): ${error.message}`,
    );
  } else {
    console.error(error);
  }
  process.exitCode = 1;
} finally {
  await client.close();
}
