import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayEvent } from '../../client/src/index.js';
import { freePort } from '../../tools/launch/ports.js';
import { builtEntryPoints, killAll, REPO, runToExit, startProcess, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import { waitFor } from '../support/wait.js';

/**
 * `npm run events:listen` (tools/events-listen/), the local webhook receiver, as its own process
 * on a free loopback port with a secret file of the test's: deliveries signed with the published
 * Standard Webhooks library are printed one line each and answered 204; a delivery signed with
 * another secret, one without headers, a changed body and an old timestamp are answered 401 with
 * a line saying why. A missing or unusable secret file and a taken port stop it at once (exit 2).
 */

let build: BuiltEntryPoints;
let scratch: string;

beforeAll(async () => {
  build = await builtEntryPoints();
  scratch = mkdtempSync(join(tmpdir(), 'events-listen-'));
}, 180_000);
afterEach(async () => {
  await killAll();
});
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

const newSecret = (): string => `whsec_${randomBytes(24).toString('base64')}`;

function secretFile(name: string, content: string): string {
  const file = join(scratch, name);
  writeFileSync(file, content, { mode: 0o600 });
  return file;
}

const CARD = {
  cardId: 'card_3f0c9a',
  pan: '************4242',
  cvc: '***',
  expMonth: 11,
  expYear: 2029,
  status: 'inactive',
  requestedCardLimit: 10_000,
  cardLimit: 10_500,
  currency: 'EUR',
  createdAt: '2026-11-28T17:12:03.000Z',
} as const;

const STATUS_CHANGED = {
  id: 'evt_01JDQ3ZV8K6Q2N7M4R5T8W9XYZ',
  type: 'card.status_changed',
  createdAt: '2026-11-29T09:00:00.123Z',
  issuingAccount: 'acct_demo',
  sequence: 42,
  data: { card: CARD, previousStatus: 'active', status: 'inactive', reason: 'Card details shared by mistake', source: 'processor' },
} as const satisfies GatewayEvent;

const DECLINED = {
  id: 'evt_01JDQ40A2B3C4D5E6F7G8H9J0K',
  type: 'transaction.declined',
  createdAt: '2026-11-29T09:00:05.000Z',
  issuingAccount: 'acct_demo',
  sequence: 43,
  data: {
    transactionId: 'txn_81',
    cardId: CARD.cardId,
    amount: 1250,
    currency: 'EUR',
    merchant: { name: 'Lisbon Airport Café', categoryCode: '5812', country: 'PT' },
    occurredAt: '2026-11-29T09:00:04.000Z',
    declineReason: 'card inactive',
  },
} as const satisfies GatewayEvent;

/** The three Standard Webhooks headers, signed now (or `ageSeconds` ago) by `secret`. */
function signed(secret: string, id: string, body: string, ageSeconds = 0): Record<string, string> {
  const signedAt = new Date(Date.now() - ageSeconds * 1000);
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(signedAt.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, signedAt, body),
  };
}

interface Listener {
  readonly process: RunningProcess;
  readonly url: string;
  /** Posts a delivery; the answer's status and text. */
  post(body: string, headers: Record<string, string>): Promise<{ status: number; text: string }>;
  /** The next line printed after the ones seen so far. */
  nextLine(): Promise<string>;
}

/** The receiver with `file`, once it says it listens (holding `secrets` secrets). */
async function startListener(file: string, secrets = 1): Promise<Listener> {
  const port = await freePort();
  const running = startProcess(process.execPath, [build.eventsListenJs, '--port', String(port), '--secret-file', file]);
  let seen = 0;
  const nextLine = async (): Promise<string> => {
    const line = await waitFor(
      'the next line of the receiver',
      () => {
        if (running.lines.length > seen) return running.lines[seen];
        if (running.hasExited()) throw new Error(`the receiver exited: ${running.describe()}`);
        return undefined;
      },
      { stopOn: () => true },
    );
    seen += 1;
    return line;
  };
  expect(await nextLine()).toBe(
    `listening on http://127.0.0.1:${port}/ (${secrets === 1 ? 'its secret' : `its ${secrets} secrets`} from ${file}); Ctrl-C stops`,
  );
  const url = `http://127.0.0.1:${port}/webhooks`;
  return {
    process: running,
    url,
    nextLine,
    post: async (body, headers) => {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
      return { status: response.status, text: await response.text() };
    },
  };
}

describe('npm run events:listen', () => {
  it('runs the receiver this test runs from the build', () => {
    const scripts = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts['events:listen']).toBe(`npm run build --silent && node dist/${relative(build.dir, build.eventsListenJs)}`);
  });

  it('prints each verified event on one line and answers 204; refuses what does not verify with 401 and a line saying why', async () => {
    const secret = newSecret();
    const listener = await startListener(secretFile('one.secret', `${secret}\n`));

    const statusBody = JSON.stringify(STATUS_CHANGED);
    expect(await listener.post(statusBody, signed(secret, STATUS_CHANGED.id, statusBody))).toEqual({ status: 204, text: '' });
    expect(await listener.nextLine()).toBe(
      '2026-11-29T09:00:00.123Z card.status_changed evt_01JDQ3ZV8K6Q2N7M4R5T8W9XYZ card=card_3f0c9a seq=42 status=active->inactive source=processor reason="Card details shared by mistake"',
    );
    const declinedBody = JSON.stringify(DECLINED);
    expect(await listener.post(declinedBody, signed(secret, DECLINED.id, declinedBody))).toEqual({ status: 204, text: '' });
    expect(await listener.nextLine()).toBe(
      '2026-11-29T09:00:05.000Z transaction.declined evt_01JDQ40A2B3C4D5E6F7G8H9J0K card=card_3f0c9a seq=43 amount=1250 currency=EUR declineReason="card inactive"',
    );

    expect(await listener.post(statusBody, signed(newSecret(), STATUS_CHANGED.id, statusBody))).toEqual({ status: 401, text: 'bad_signature\n' });
    expect(await listener.nextLine()).toBe('refused bad_signature (webhook-id evt_01JDQ3ZV8K6Q2N7M4R5T8W9XYZ): no v1 signature matches the secret');
    expect(await listener.post(statusBody.replace('"sequence":42', '"sequence":44'), signed(secret, STATUS_CHANGED.id, statusBody))).toEqual({
      status: 401,
      text: 'bad_signature\n',
    });
    expect(await listener.nextLine()).toBe('refused bad_signature (webhook-id evt_01JDQ3ZV8K6Q2N7M4R5T8W9XYZ): no v1 signature matches the secret');
    expect(await listener.post(statusBody, {})).toEqual({ status: 401, text: 'missing_headers\n' });
    expect(await listener.nextLine()).toBe('refused missing_headers: missing webhook-id, webhook-timestamp, webhook-signature');
    // Well past the 300 s tolerance, whatever the time between signing and checking.
    expect(await listener.post(statusBody, signed(secret, STATUS_CHANGED.id, statusBody, 3600))).toMatchObject({
      status: 401,
      text: 'timestamp_outside_tolerance\n',
    });
    expect(await listener.nextLine()).toMatch(
      /^refused timestamp_outside_tolerance \(webhook-id evt_\w+\): webhook-timestamp is 360\d s in the past \(tolerance 300 s\)$/,
    );

    // Stops on SIGTERM by itself, having printed nothing more.
    listener.process.child.kill('SIGTERM');
    expect(await listener.process.exitWithin(20_000)).toEqual({ code: 0, signal: null });
    expect(listener.process.lines).toHaveLength(7);
    expect(listener.process.stderr()).toBe('');
    expect(listener.process.stdout()).not.toContain(secret.slice('whsec_'.length));
  });

  it('takes every secret of the file during a rotation: a delivery signed by the second one verifies', async () => {
    const [old, current] = [newSecret(), newSecret()];
    const listener = await startListener(secretFile('rotation.secret', `${old}\n${current}\n\n`), 2);
    const body = JSON.stringify(STATUS_CHANGED);
    expect(await listener.post(body, signed(current, STATUS_CHANGED.id, body))).toEqual({ status: 204, text: '' });
    expect(await listener.nextLine()).toMatch(/^2026-11-29T09:00:00\.123Z card\.status_changed /);
    expect(await listener.post(body, signed(newSecret(), STATUS_CHANGED.id, body))).toEqual({ status: 401, text: 'bad_signature\n' });
    expect(await listener.nextLine()).toMatch(/no v1 signature matches any of the 2 secrets$/);
  });

  it('exits 2 at once, saying why, without a secret file, with a file that holds no usable secret, or with its port taken', async () => {
    const missing = join(scratch, 'absent.secret');
    const run = (...args: string[]) => runToExit(process.execPath, [build.eventsListenJs, '--port', '0', ...args]);

    const absent = await run('--secret-file', missing);
    expect(absent.code).toBe(2);
    expect(absent.stdout).toBe('');
    expect(absent.stderr).toBe(
      `events:listen: no webhook secret file at ${missing}: the local gateway writes it at its start (npm start, config/local.yaml), or pass --secret-file FILE\n`,
    );

    const notSecret = 'not-a-webhook-secret!';
    const wrong = await run('--secret-file', secretFile('wrong.secret', `${notSecret}\n`));
    expect(wrong).toMatchObject({
      code: 2,
      stdout: '',
      stderr: `events:listen: ${join(scratch, 'wrong.secret')}: the webhook secret is not whsec_ followed by base64\n`,
    });
    expect(wrong.stderr).not.toContain(notSecret);
    const empty = await run('--secret-file', secretFile('empty.secret', '\n'));
    expect(empty).toMatchObject({ code: 2, stderr: `events:listen: ${join(scratch, 'empty.secret')} holds no secret (whsec_...)\n` });

    const unknown = await run('--secret-file', secretFile('good.secret', newSecret()), '--verbose');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^events:listen: Unknown option '--verbose'/);

    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as { port: number }).port;
      const busy = await runToExit(process.execPath, [build.eventsListenJs, '--port', String(port), '--secret-file', join(scratch, 'good.secret')]);
      expect(busy).toMatchObject({
        code: 2,
        stdout: '',
        stderr: `events:listen: cannot listen on 127.0.0.1:${port} (events receiver listener): address already in use\n`,
      });
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
