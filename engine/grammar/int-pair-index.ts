// Hash tables keyed by two non-negative 31-bit integers (a below 2^31 - 1), in typed arrays (open addressing,
// linear probing). The recognizer interns millions of (position, parent) pairs: a Map keyed
// by `parent * positions + pos` turns keys past 2^30 into heap numbers, and its entries are
// work for every full collection; here a table is three arrays whatever its size.

const EMPTY = -1;

function hashPair(a: number, b: number): number {
  return Math.imul(a ^ Math.imul(b, 0x9e3779b1), 0x85ebca6b) ^ (b >>> 7);
}

/** The slot holding (a, b), or the empty slot where it would go (linear probing; the table is never full). */
function slotOf(keyA: Int32Array, keyB: Int32Array, mask: number, a: number, b: number): number {
  for (let i = hashPair(a, b) & mask; ; i = (i + 1) & mask) {
    const k = keyA[i];
    if (k === EMPTY || (k === a && keyB[i] === b)) return i;
  }
}

/** Slots an IntPairIndex moves from its old table to the new one per set() while it grows. */
const MOVED_PER_SET = 8;

/**
 * (a, b) → a non-negative value. One table of slots of three words (a + 1, b, value; a zero
 * first word is an empty slot, so a new table needs no fill). It grows without a pause: the
 * doubled table takes new pairs at once, lookups also read the old one, and each set() moves
 * MOVED_PER_SET of the old slots over. Rehashing all at once took 5.5 ms inside one mask at a
 * few million stack nodes (detekt's schema); the move is done long before the next doubling
 * (n old slots moved within n / 8 sets, the new table half full after n / 2).
 */
export class IntPairIndex {
  private slots: Int32Array;
  private mask: number;
  /** The table before the last doubling while its slots are being moved, else null. */
  private old: Int32Array | null = null;
  private oldMask = 0;
  /** Old slots below this one are moved. */
  private moved = 0;
  size = 0;
  /** Slots written so far, moves included: the work sets did (for tests). */
  slotsWritten = 0;

  constructor(capacity = 1024) {
    let n = 16;
    while (n < 2 * capacity) n *= 2;
    this.slots = new Int32Array(3 * n);
    this.mask = n - 1;
  }

  /** The value of (a, b), or -1. */
  get(a: number, b: number): number {
    const i = slotOf3(this.slots, this.mask, a, b);
    if (this.slots[3 * i] !== 0) return this.slots[3 * i + 2];
    if (!this.old) return -1;
    const j = slotOf3(this.old, this.oldMask, a, b);
    return this.old[3 * j] === 0 ? -1 : this.old[3 * j + 2];
  }

  /** Sets (a, b) → value (value >= 0). */
  set(a: number, b: number, value: number): void {
    if (this.old) this.moveSome();
    const i = slotOf3(this.slots, this.mask, a, b);
    if (this.slots[3 * i] !== 0) {
      this.slots[3 * i + 2] = value;
      return;
    }
    if (this.old) {
      // Not moved yet: changed where it is, moved with its new value.
      const j = slotOf3(this.old, this.oldMask, a, b);
      if (this.old[3 * j] !== 0) {
        this.old[3 * j + 2] = value;
        return;
      }
    }
    this.put(i, a, b, value);
    this.size++;
    if (2 * this.size > this.mask + 1) this.grow();
  }

  private put(i: number, a: number, b: number, value: number): void {
    this.slots[3 * i] = a + 1;
    this.slots[3 * i + 1] = b;
    this.slots[3 * i + 2] = value;
    this.slotsWritten++;
  }

  private grow(): void {
    // The previous move is done by now (see the class comment); finished here if not.
    while (this.old) this.moveSome();
    this.old = this.slots;
    this.oldMask = this.mask;
    this.moved = 0;
    const n = 2 * (this.mask + 1);
    this.slots = new Int32Array(3 * n);
    this.mask = n - 1;
  }

  private moveSome(): void {
    const old = this.old!;
    const end = Math.min(this.oldMask + 1, this.moved + MOVED_PER_SET);
    for (let k = this.moved; k < end; k++) {
      if (old[3 * k] === 0) continue;
      const a = old[3 * k] - 1, b = old[3 * k + 1];
      this.put(slotOf3(this.slots, this.mask, a, b), a, b, old[3 * k + 2]);
    }
    this.moved = end;
    if (end === this.oldMask + 1) this.old = null;
  }
}

/** slotOf for a table of three-word slots whose first word is a + 1 (0: empty). */
function slotOf3(slots: Int32Array, mask: number, a: number, b: number): number {
  const a1 = a + 1;
  for (let i = hashPair(a, b) & mask; ; i = (i + 1) & mask) {
    const k = slots[3 * i];
    if (k === 0 || (k === a1 && slots[3 * i + 1] === b)) return i;
  }
}

/**
 * A set of (a, b) pairs emptied often (the recognizer's closure, once per transition): clear()
 * resets only the slots used since the last clear, so a small closure costs little in a table
 * that grew for a large one.
 */
export class IntPairSet {
  private keyA: Int32Array;
  private keyB: Int32Array;
  private mask: number;
  private used: Int32Array;
  private count = 0;

  constructor(capacity = 256) {
    let n = 16;
    while (n < 2 * capacity) n *= 2;
    this.keyA = new Int32Array(n).fill(EMPTY);
    this.keyB = new Int32Array(n);
    this.used = new Int32Array(n >>> 1);
    this.mask = n - 1;
  }

  /** Adds (a, b); false when it was there already. */
  add(a: number, b: number): boolean {
    if (2 * (this.count + 1) > this.keyA.length) this.grow();
    const i = slotOf(this.keyA, this.keyB, this.mask, a, b);
    if (this.keyA[i] !== EMPTY) return false;
    this.keyA[i] = a;
    this.keyB[i] = b;
    this.used[this.count++] = i;
    return true;
  }

  clear(): void {
    for (let k = 0; k < this.count; k++) this.keyA[this.used[k]] = EMPTY;
    this.count = 0;
  }

  private grow(): void {
    const { keyA, keyB, used, count } = this;
    const n = keyA.length * 2;
    this.keyA = new Int32Array(n).fill(EMPTY);
    this.keyB = new Int32Array(n);
    this.used = new Int32Array(n >>> 1);
    this.mask = n - 1;
    this.count = 0;
    for (let k = 0; k < count; k++) this.add(keyA[used[k]], keyB[used[k]]);
  }
}
