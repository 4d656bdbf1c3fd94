import type { FieldProblem } from '../edge/errors.js';
import type { CardRequest } from './card-schemas.js';
import { ISO_4217_CODES } from './iso-4217.js';
import { applyTolerance } from './tolerance.js';

function isCalendarValid(timestamp: string): boolean {
  const ms = Date.parse(timestamp);
  // Date.parse rolls 2026-02-30 over to March; comparing the date part catches that.
  return Number.isFinite(ms) && new Date(ms).toISOString().slice(0, 10) === timestamp.slice(0, 10) && Number(timestamp.slice(11, 13)) < 24;
}

/**
 * The D14 rules a JSON schema cannot express: a real ISO 4217 code enabled for the account,
 * real calendar dates with start before end, and an effective limit that stays a safe integer.
 * Returns the effective limit (D15) when there is no problem.
 */
export function checkCardRequest(body: CardRequest, enabledCurrencies: ReadonlySet<string> | undefined): { problems: FieldProblem[]; effectiveLimit: number } {
  const problems: FieldProblem[] = [];
  if (!ISO_4217_CODES.has(body.currency)) problems.push({ path: 'currency', message: 'is not an ISO 4217 currency code' });
  else if (!enabledCurrencies?.has(body.currency)) problems.push({ path: 'currency', message: 'is not enabled for this issuing account' });

  const window = body.config?.authorizationWindow;
  if (window) {
    const startValid = isCalendarValid(window.startDate);
    const endValid = isCalendarValid(window.endDate);
    if (!startValid) problems.push({ path: 'config.authorizationWindow.startDate', message: 'is not a valid date and time' });
    if (!endValid) problems.push({ path: 'config.authorizationWindow.endDate', message: 'is not a valid date and time' });
    if (startValid && endValid && Date.parse(window.startDate) >= Date.parse(window.endDate)) {
      problems.push({ path: 'config.authorizationWindow', message: 'startDate must be before endDate' });
    }
  }

  const effective = applyTolerance(body.cardLimit, body.config?.tolerance?.percentage ?? 0);
  if (effective === undefined) problems.push({ path: 'cardLimit', message: 'with the tolerance applied exceeds the largest supported limit' });
  return { problems, effectiveLimit: effective ?? 0 };
}
