// What the load-time quantisers read, and how they share the event loop while they do.
// A matrix comes as f32 values or as f16 bit patterns: an f16 checkpoint's tensor is read as its bits, without
// a copy, since decoding the whole matrix to f32 first took about as long as quantising it. The quantisers
// decode each weight through the 65,536-entry table (exact), so both inputs give the same codes.

import { getF16ToF32Table } from '../loader/dtype';

/** [n, k] row-major weights: f32 values, or f16 bit patterns (a Uint16Array is always f16 bits here). */
export type WeightValues = Float32Array | Uint16Array;

let f16ValueTable: Float64Array | undefined;
/**
 * The value of every f16 bit pattern, for decoding one weight at a time: as doubles (512 KiB, built once), which
 * the quantisers multiply without a conversion per load (15 % of the int8 quantiser); the same exact values as
 * the loader's f32 table.
 */
export function f16Values(): Float64Array {
  return (f16ValueTable ??= Float64Array.from(getF16ToF32Table()));
}

/** About this many weights are quantised between two yields to the event loop (10–30 ms of work). */
export const WEIGHTS_PER_YIELD = 1 << 22;

/** Lets timers, I/O and other requests run before the next piece of a long load. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * f16 bits read two at a time, as the u32 words they pair into (element 2j in the low half): half the loads and
 * bounds checks, which is a third of the quantisers' time on a large matrix. Needs a 4-byte aligned view and a
 * little-endian machine (every platform Node runs on today; others take the one-at-a-time loops).
 */
export function bitPairs(bits: Uint16Array): Uint32Array | null {
  if (!LITTLE_ENDIAN || bits.byteOffset % 4 !== 0) return null;
  return new Uint32Array(bits.buffer, bits.byteOffset, bits.length >> 1);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** maxMagnitudeBits over pairs [from2, to2) of bitPairs (elements 2·from2 .. 2·to2). */
export function maxMagnitudePairs(pairs: Uint32Array, from2: number, to2: number): number {
  let m = 0;
  for (let j = from2; j < to2; j++) {
    const w = pairs[j];
    const a = w & 0x7fff;
    const b = (w >>> 16) & 0x7fff;
    if (a > m) m = a;
    if (b > m) m = b;
  }
  return m;
}

/** The largest |w| of bits[from, to) as an f16 bit pattern: positive f16 patterns sort like their values. */
export function maxMagnitudeBits(bits: Uint16Array, from: number, to: number): number {
  let m = 0;
  for (let i = from; i < to; i++) {
    const a = bits[i] & 0x7fff;
    if (a > m) m = a;
  }
  return m;
}

/**
 * The largest |w| of vals[from, to); NaN when one of them is NaN, wherever it is (the quantisers refuse it:
 * their earlier max loop let a later weight replace a NaN, which then quantised silently to the code 0).
 */
export function maxMagnitude(vals: Float32Array, from: number, to: number): number {
  let max = 0;
  for (let i = from; i < to; i++) {
    const a = Math.abs(vals[i]);
    if (a > max) max = a;
    else if (a !== a) return NaN;
  }
  return max;
}
