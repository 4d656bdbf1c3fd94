import { KeyObject } from 'node:crypto';

/** Read-only all the way down; byte buffers and keys are values, not trees. */
export type DeepReadonly<T> = T extends Buffer | KeyObject | ((...args: never[]) => unknown)
  ? T
  : T extends ReadonlyMap<infer K, infer V>
    ? ReadonlyMap<K, DeepReadonly<V>>
    : T extends ReadonlySet<infer V>
      ? ReadonlySet<DeepReadonly<V>>
      : T extends readonly (infer U)[]
        ? readonly DeepReadonly<U>[]
        : T extends object
          ? { readonly [P in keyof T]: DeepReadonly<T[P]> }
          : T;

/** A Map nobody can change: the read half of Map's interface over a private copy. */
export function readonlyMap<K, V>(entries: Iterable<readonly [K, V]>): ReadonlyMap<K, V> {
  const map = new Map<K, V>(entries);
  // forEach hands its callback the view, never the private copy behind it.
  const view: ReadonlyMap<K, V> = Object.freeze({
    get: (key: K) => map.get(key),
    has: (key: K) => map.has(key),
    get size() {
      return map.size;
    },
    forEach: (callback: (value: V, key: K, self: ReadonlyMap<K, V>) => void, thisArg?: unknown) =>
      map.forEach((value, key) => callback.call(thisArg, value, key, view)),
    keys: () => map.keys(),
    values: () => map.values(),
    entries: () => map.entries(),
    [Symbol.iterator]: () => map[Symbol.iterator](),
  });
  return view;
}

/** A Set nobody can change. */
export function readonlySet<T>(values: Iterable<T>): ReadonlySet<T> {
  const set = new Set<T>(values);
  const view = Object.freeze({
    has: (value: T) => set.has(value),
    get size() {
      return set.size;
    },
    forEach: (callback: (value: T, again: T, self: ReadonlySet<T>) => void, thisArg?: unknown) =>
      set.forEach((value) => callback.call(thisArg, value, value, view)),
    keys: () => set.keys(),
    values: () => set.values(),
    entries: () => set.entries(),
    [Symbol.iterator]: () => set[Symbol.iterator](),
  }) as ReadonlySet<T>;
  return view;
}

/**
 * Freezes plain objects and arrays recursively: the config is validated once, then frozen.
 * Buffers and keys cannot be frozen and are values anyway; maps and sets must already be
 * read-only views (readonlyMap, readonlySet), which are frozen objects themselves.
 */
export function deepFreeze<T>(value: T): DeepReadonly<T> {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value as DeepReadonly<T>;
  if (ArrayBuffer.isView(value) || value instanceof KeyObject) return value as DeepReadonly<T>;
  if (value instanceof Map || value instanceof Set) throw new TypeError('deepFreeze: use readonlyMap/readonlySet, a Map or Set cannot be frozen');
  for (const key of Reflect.ownKeys(value)) deepFreeze((value as Record<string | symbol, unknown>)[key]);
  return Object.freeze(value) as DeepReadonly<T>;
}
