/** D18: every PAN digit but the last four becomes `*`, length kept. */
export function maskPan(pan: string): string {
  return pan.length <= 4 ? '*'.repeat(pan.length) : '*'.repeat(pan.length - 4) + pan.slice(-4);
}

/** D18: every CVC character becomes `*`. */
export function maskCvc(cvc: string): string {
  return '*'.repeat(cvc.length);
}

/** Runs of 13 or more digits (spaces or dashes between them allowed): card numbers written into free text. */
const CARD_NUMBER_IN_TEXT = /\d(?:[ -]?\d){12,}/g;

/**
 * Free client text (a status change's reason) with anything shaped like a card number masked as
 * D18 masks a PAN (every digit but the last four), so it may be audited.
 */
export function maskCardNumbersIn(text: string): string {
  return text.replace(CARD_NUMBER_IN_TEXT, (run) => {
    let digitsLeft = run.replace(/\D/g, '').length;
    return run.replace(/\d/g, (digit) => (digitsLeft-- > 4 ? '*' : digit));
  });
}
