/** D18: every PAN digit but the last four becomes `*`, length kept. */
export function maskPan(pan: string): string {
  return pan.length <= 4 ? '*'.repeat(pan.length) : '*'.repeat(pan.length - 4) + pan.slice(-4);
}

/** D18: every CVC character becomes `*`. */
export function maskCvc(cvc: string): string {
  return '*'.repeat(cvc.length);
}
