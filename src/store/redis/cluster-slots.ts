import type { Cluster } from 'ioredis';

/** A run of consecutive slots served by one master (`host:port`). */
export interface ShardRange {
  start: number;
  end: number;
  master: string;
}

/** A master change of a Cluster shard: the slots (`0-5460`, `5461,5462-10922`) that moved from one master to another. */
export interface ShardChange {
  from: string | undefined;
  to: string;
  slots: string;
}

/** `host:port` of every slot range's master, in slot order, from the client's slot map. */
export function shardRanges(cluster: Cluster): ShardRange[] {
  const ranges: ShardRange[] = [];
  let current: ShardRange | undefined;
  for (let slot = 0; slot < 16384; slot += 1) {
    const master = cluster.slots[slot]?.[0];
    if (master === undefined) {
      current = undefined;
    } else if (current && current.master === master) {
      current.end = slot;
    } else {
      current = { start: slot, end: slot, master };
      ranges.push(current);
    }
  }
  return ranges;
}

/** The masters of a slot map, each once. */
export const mastersOf = (ranges: readonly ShardRange[]): string[] => [...new Set(ranges.map((range) => range.master))];

const masterAt = (ranges: readonly ShardRange[], slot: number): string | undefined => ranges.find((range) => slot >= range.start && slot <= range.end)?.master;

/** One change per pair of old and new master: what a shard's failover moved. */
export function shardChanges(previous: readonly ShardRange[], ranges: readonly ShardRange[]): ShardChange[] {
  const changes = new Map<string, { from: string | undefined; to: string; slots: string[] }>();
  for (const range of ranges) {
    const from = masterAt(previous, range.start);
    if (from === range.master) continue;
    const id = `${from ?? ''}>${range.master}`;
    const change = changes.get(id) ?? { from, to: range.master, slots: [] };
    change.slots.push(range.start === range.end ? String(range.start) : `${range.start}-${range.end}`);
    changes.set(id, change);
  }
  return [...changes.values()].map(({ from, to, slots }) => ({ from, to, slots: slots.join(',') }));
}
