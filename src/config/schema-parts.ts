import type { Static, TObject, TProperties, TSchema } from '@sinclair/typebox';
import { Ajv, type ValidateFunction } from 'ajv';

/**
 * The parts of a file that its schema accepts, each on its own (D52). The whole file is checked
 * once, and every schema problem reported from there; a section then resolves what it can: a
 * well-formed file reference is read even when a sibling setting is misspelled or mistyped.
 * Nothing here reports: a part that does not fit its schema is simply not there.
 */

const ajv = new Ajv({ useDefaults: true, strict: false });
const validators = new WeakMap<TSchema, ValidateFunction>();

export const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** `value` when it satisfies `schema`, typed by it; undefined when it does not or is absent. */
export function accept<S extends TSchema>(schema: S, value: unknown): Static<S> | undefined {
  if (value === undefined) return undefined;
  let validate = validators.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    validators.set(schema, validate);
  }
  return validate(value) ? (value as Static<S>) : undefined;
}

/** Each member of an object that satisfies its own schema, whatever its siblings hold. */
export function members<P extends TProperties>(schema: TObject<P>, value: unknown): { [K in keyof P]?: Static<P[K]> } {
  const accepted: { [K in keyof P]?: Static<P[K]> } = {};
  if (!isRecord(value)) return accepted;
  for (const [key, memberSchema] of Object.entries(schema.properties) as [keyof P & string, TSchema][]) {
    const member = accept(memberSchema, value[key]);
    if (member !== undefined) accepted[key] = member as Static<P[typeof key]>;
  }
  return accepted;
}

/** A member of an object as the file has it (not checked). */
export const child = (value: unknown, key: string): unknown => (isRecord(value) ? value[key] : undefined);

/** The entries of a list as the file has them (not checked); none when it is no list. */
export const entries = (value: unknown): readonly unknown[] => (Array.isArray(value) ? value : []);

/** Whether the file sets `key` at all, well-formed or not. */
export const present = (value: unknown, key: string): boolean => child(value, key) !== undefined;
