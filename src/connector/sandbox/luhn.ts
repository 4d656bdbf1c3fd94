const DIGITS_ONLY = /^\d*$/;

/**
 * The Luhn (mod 10) check digit to append to `digits`.
 * @throws TypeError when `digits` holds anything but ASCII digits.
 */
export function luhnCheckDigit(digits: string): string {
  if (!DIGITS_ONLY.test(digits)) throw new TypeError('luhnCheckDigit: digits only');
  let sum = 0;
  // Walking from the right, the digit next to the (future) check digit is doubled first.
  for (let i = digits.length - 1, double = true; i >= 0; i -= 1, double = !double) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return String((10 - (sum % 10)) % 10);
}

/** True when `pan` is at least two ASCII digits and its last digit is the Luhn check digit. */
export function isLuhnValid(pan: string): boolean {
  if (pan.length < 2 || !DIGITS_ONLY.test(pan)) return false;
  return luhnCheckDigit(pan.slice(0, -1)) === pan.slice(-1);
}
