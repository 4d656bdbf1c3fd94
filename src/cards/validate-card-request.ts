import type { FieldProblem } from '../foundation/errors.js';
import type { CardRequest } from './card-schemas.js';
import { ISO_4217_CODES } from './iso-4217.js';
import { applyTolerance } from './tolerance.js';

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const digits = (text: string, from: number, length: number): number => Number(text.slice(from, from + length));

/**
 * A real calendar instant: the schema's pattern already guaranteed the shape
 * `YYYY-MM-DDTHH:MM:SS[.fff]Z`; here month, day (leap years included), hour, minute and second
 * must exist. Arithmetic, not Date.parse, which would roll 2026-02-30 over to March.
 */
export function isCalendarValid(timestamp: string): boolean {
  const year = digits(timestamp, 0, 4);
  const month = digits(timestamp, 5, 2);
  const day = digits(timestamp, 8, 2);
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const daysInMonth = month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!;
  return day <= daysInMonth && digits(timestamp, 11, 2) < 24 && digits(timestamp, 14, 2) < 60 && digits(timestamp, 17, 2) < 60;
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
