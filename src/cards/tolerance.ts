/**
 * D15: effective limit = requested + floor(requested × P / 100). BigInt keeps the product
 * exact for every safe integer; undefined when the result would not be a safe integer.
 */
export function applyTolerance(requested: number, percentage: number): number | undefined {
  const effective = BigInt(requested) + (BigInt(requested) * BigInt(percentage)) / 100n;
  return effective <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(effective) : undefined;
}
