// Cached results of mask walks (token-masks.ts: what one trie subtree holds from one automaton
// state), packed in arenas instead of one typed array each. The caches of the constraints kept
// compiled hold tens of thousands of these, and each typed array is two heap objects that
// every full collection marks; here a cache is two arrays and two maps whatever it holds.
//
// Bounded by two generations: results are added to the current arena; when it is full it
// becomes the old one (the previous old one is dropped) and a fresh one starts. A result
// found in the old arena is copied into the current one, so what is in use survives.

/** A result: token ids (>= 1) and crossings stored as -1 - crossing (token-masks.ts). */
export class WalkStore {
  /** The current arena: a record is its length, then its entries. */
  data: Int32Array;
  private used = 0;
  private index = new Map<number, number>();
  private oldData: Int32Array | null = null;
  private oldIndex: Map<number, number> | null = null;

  /** `capacity`: entries per generation (the store holds at most twice as many, plus one word a record). */
  constructor(private readonly capacity: number) {
    this.data = new Int32Array(Math.min(1024, capacity));
  }

  /** Offset in `data` of the record of `key` (read it before the next add or get), or -1. */
  get(key: number): number {
    const at = this.index.get(key);
    if (at !== undefined) return at;
    const old = this.oldIndex?.get(key);
    if (old === undefined) return -1;
    // Copied out before add() may drop the old arena.
    const from = this.oldData!;
    return this.add(key, from.subarray(old + 1, old + 1 + from[old]));
  }

  /** Adds a record (entries as get() gives them) and gives its offset in `data`. */
  add(key: number, entries: ArrayLike<number>): number {
    const n = entries.length + 1;
    if (this.used + n > this.capacity) this.rotate();
    if (this.used + n > this.data.length) {
      const grown = new Int32Array(Math.max(Math.min(2 * this.data.length, this.capacity), this.used + n));
      grown.set(this.data.subarray(0, this.used));
      this.data = grown;
    }
    const at = this.used;
    this.data[at] = entries.length;
    for (let k = 0; k < entries.length; k++) this.data[at + 1 + k] = entries[k];
    this.used += n;
    this.index.set(key, at);
    return at;
  }

  /** Entries held in both generations. */
  get size(): number {
    return this.used + (this.oldIndex ? this.oldUsed : 0);
  }
  private oldUsed = 0;

  private rotate(): void {
    this.oldData = this.data;
    this.oldIndex = this.index;
    this.oldUsed = this.used;
    this.data = new Int32Array(Math.min(1024, this.capacity));
    this.index = new Map();
    this.used = 0;
  }
}
