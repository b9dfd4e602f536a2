/**
 * A per-request cache that a stream of new keys cannot turn into old
 * garbage (docs/http/node.md, Caches and the garbage collector).
 *
 * Not a Map emptied when full: V8 gives a Map a new table each time it is
 * cleared or grows, and the old table keeps its entries and a pointer to
 * the new one. Once one table has been promoted (the small new space after
 * an idle spell, or a mark-compact, moves the live one to old space) and
 * is then replaced, the dead old table keeps its successor alive through
 * the scavenges, so the successor is promoted too, then its own successor:
 * every entry a flood of new keys makes is promoted until the next
 * mark-compact, which promotes the table of the day and starts it again.
 * Here a key has one slot of a fixed table (its hash's), and takes it
 * only when it comes back: its first coming notes its hash, a number in a
 * typed array, and nothing else. A flood of keys never seen again (a fresh
 * subject every other request) keeps nothing and evicts nothing; a key
 * that returns takes its slot's place, and nothing dead points at anything
 * newer.
 */
export class Recent<V> {
  readonly #keys: (string | undefined)[];
  readonly #values: (V | undefined)[];
  /** Each slot's last key seen, by hash: the key whose next coming takes the slot. */
  readonly #seen: Uint32Array;
  readonly #mask: number;
  /** The last key found or kept, and its value: a server's one client, or its commonest, is found without hashing. */
  #lastKey: string | undefined = undefined;
  #lastValue: V | undefined = undefined;

  /** `size`: the slots, a power of two. */
  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1 || (size & (size - 1)) !== 0) throw new RangeError("librl: Recent needs a power of two");
    this.#keys = new Array<string | undefined>(size).fill(undefined);
    this.#values = new Array<V | undefined>(size).fill(undefined);
    this.#seen = new Uint32Array(size);
    this.#mask = size - 1;
  }

  /** The value kept for `key`, else undefined. */
  get(key: string): V | undefined {
    if (key === this.#lastKey) return this.#lastValue;
    const slot = hashOf(key) & this.#mask;
    if (this.#keys[slot] !== key) return undefined;
    const value = this.#values[slot];
    this.#lastKey = key;
    this.#lastValue = value;
    return value;
  }

  /**
   * Keeps `value` for `key` when the key was seen last in its slot (its
   * second coming, after a miss), in place of what the slot held; else
   * only notes that it was seen.
   */
  offer(key: string, value: V): void {
    const hash = hashOf(key);
    const slot = hash & this.#mask;
    if (this.#seen[slot] !== hash) {
      this.#seen[slot] = hash;
      return;
    }
    this.#keys[slot] = key;
    this.#values[slot] = value;
    this.#lastKey = key;
    this.#lastValue = value;
  }
}

/** How many of a key's last characters its slot depends on: subjects differ at their end (their kind is the start), and a long one costs no more. */
const HASHED = 64;

/** FNV-1a over the key's length and its last HASHED UTF-16 units. */
function hashOf(key: string): number {
  let h = Math.imul(0x811c9dc5 ^ key.length, 0x01000193);
  for (let i = Math.max(0, key.length - HASHED); i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
