// Hash tables keyed by two non-negative 31-bit integers, in typed arrays (open addressing,
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

/** (a, b) → a non-negative value. */
export class IntPairIndex {
  private keyA: Int32Array;
  private keyB: Int32Array;
  private value: Int32Array;
  private mask: number;
  size = 0;

  constructor(capacity = 1024) {
    let n = 16;
    while (n < 2 * capacity) n *= 2;
    this.keyA = new Int32Array(n).fill(EMPTY);
    this.keyB = new Int32Array(n);
    this.value = new Int32Array(n);
    this.mask = n - 1;
  }

  /** The value of (a, b), or -1. */
  get(a: number, b: number): number {
    const i = slotOf(this.keyA, this.keyB, this.mask, a, b);
    return this.keyA[i] === EMPTY ? -1 : this.value[i];
  }

  /** Sets (a, b) → value (value >= 0). */
  set(a: number, b: number, value: number): void {
    if (2 * (this.size + 1) > this.keyA.length) this.grow();
    const i = slotOf(this.keyA, this.keyB, this.mask, a, b);
    if (this.keyA[i] === EMPTY) {
      this.keyA[i] = a;
      this.keyB[i] = b;
      this.size++;
    }
    this.value[i] = value;
  }

  private grow(): void {
    const { keyA, keyB, value } = this;
    const n = keyA.length * 2;
    this.keyA = new Int32Array(n).fill(EMPTY);
    this.keyB = new Int32Array(n);
    this.value = new Int32Array(n);
    this.mask = n - 1;
    this.size = 0;
    for (let i = 0; i < keyA.length; i++) if (keyA[i] !== EMPTY) this.set(keyA[i], keyB[i], value[i]);
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
