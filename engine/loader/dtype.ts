// Element-type conversions between the formats weights arrive in (bf16, f16, f32) and the ones the
// GPU wants (f32 or f16). These loops run over multi-GB models, so they work on raw bit patterns
// through typed-array views and lookup tables instead of per-element DataView or Math calls.

import type { DType, RawTensor } from '../types';

const BYTES_PER_ELEMENT: Record<DType, number> = { f32: 4, f16: 2, bf16: 2, i32: 4 };

export function bytesPerElement(dtype: DType): number {
  return BYTES_PER_ELEMENT[dtype];
}

/** Number of elements of a shape (1 for a scalar shape []). */
export function numElements(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Exact f16 → f32 of one bit pattern (subnormals, ±inf, NaN included). */
export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** f32 bit pattern → f16 bit pattern, rounding to nearest even; overflow → ±inf, NaN stays NaN. */
export function f32BitsToF16Bits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return mant ? sign | 0x7e00 | (mant >>> 13) : sign | 0x7c00;
  const e = exp - 112; // exponent re-biased from 127 to 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Result is an f16 subnormal (or zero): shift the full 24-bit significand into 10 bits.
    const shift = 14 - e;
    if (shift > 24) return sign; // below half the smallest subnormal
    const sig = mant | 0x800000;
    let r = sig >>> shift;
    const rem = sig & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && r & 1)) r++; // may carry into the smallest normal: still correct
    return sign | r;
  }
  let r = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && r & 1)) r++; // a carry into the exponent rounds up to inf correctly
  return sign | r;
}

/** Round one number to the nearest f16 and return its bit pattern. */
export function f32ToF16Bits(value: number): number {
  scratchF32[0] = value;
  return f32BitsToF16Bits(scratchU32[0]);
}

/** bf16 bit pattern → f32 value. */
export function bf16BitsToF32(b: number): number {
  scratchU32[0] = (b & 0xffff) << 16;
  return scratchF32[0];
}

// 64K-entry tables: one lookup per element beats any bit twiddling in JS.
let f16ToF32Table: Float32Array | undefined;
/** The value of every f16 bit pattern (index = bits), built on first use and shared: do not write to it. */
export function getF16ToF32Table(): Float32Array {
  if (!f16ToF32Table) {
    f16ToF32Table = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) f16ToF32Table[h] = f16BitsToF32(h);
  }
  return f16ToF32Table;
}

let bf16ToF16Table: Uint16Array | undefined;
function getBf16ToF16Table(): Uint16Array {
  if (!bf16ToF16Table) {
    bf16ToF16Table = new Uint16Array(65536);
    for (let b = 0; b < 65536; b++) bf16ToF16Table[b] = f32BitsToF16Bits((b << 16) >>> 0);
  }
  return bf16ToF16Table;
}

export function f16ToF32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const table = getF16ToF32Table();
  for (let i = 0, n = src.length; i < n; i++) dst[i] = table[src[i]];
  return dst;
}

export function bf16ToF32(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const out = new Uint32Array(dst.buffer, dst.byteOffset, dst.length);
  for (let i = 0, n = src.length; i < n; i++) out[i] = src[i] << 16;
  return dst;
}

export function f32ToF16(src: Float32Array, dst: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0, n = bits.length; i < n; i++) dst[i] = f32BitsToF16Bits(bits[i]);
  return dst;
}

/** bf16 → f16 through the exact value (bf16 ⊂ f32), rounded to nearest even. */
export function bf16ToF16(src: Uint16Array, dst: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  const table = getBf16ToF16Table();
  for (let i = 0, n = src.length; i < n; i++) dst[i] = table[src[i]];
  return dst;
}

/**
 * A typed view over a tensor's bytes. Typed arrays need their offset aligned to the element size;
 * bytes sliced out of an arbitrary file position may not be, in which case they are copied once.
 */
function alignedView<T>(bytes: Uint8Array, size: number, make: (b: ArrayBufferLike, off: number, len: number) => T): T {
  if (bytes.byteLength % size !== 0) throw new Error(`tensor byte length ${bytes.byteLength} is not a multiple of ${size}`);
  if (bytes.byteOffset % size === 0) return make(bytes.buffer, bytes.byteOffset, bytes.byteLength / size);
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return make(copy.buffer, 0, bytes.byteLength / size);
}

function u16View(bytes: Uint8Array): Uint16Array {
  return alignedView(bytes, 2, (b, o, n) => new Uint16Array(b, o, n));
}

function checkFloat(t: RawTensor): void {
  if (t.dtype === 'i32') throw new Error(`tensor ${t.name} is i32; expected a float type (f32, f16, bf16)`);
}

/** The tensor as f32 values. For an f32 tensor this is a view sharing memory with t.bytes (when aligned). */
export function toF32(t: RawTensor): Float32Array {
  checkFloat(t);
  if (t.dtype === 'f32') return alignedView(t.bytes, 4, (b, o, n) => new Float32Array(b, o, n));
  const src = u16View(t.bytes);
  return t.dtype === 'f16' ? f16ToF32(src) : bf16ToF32(src);
}

/** The tensor as f16 bit patterns. For an f16 tensor this is a view sharing memory with t.bytes (when aligned). */
export function toF16Bits(t: RawTensor): Uint16Array {
  checkFloat(t);
  if (t.dtype === 'f16') return u16View(t.bytes);
  if (t.dtype === 'bf16') return bf16ToF16(u16View(t.bytes));
  return f32ToF16(alignedView(t.bytes, 4, (b, o, n) => new Float32Array(b, o, n)));
}

/** An i32 tensor's values (copied when unaligned). */
export function toI32(t: RawTensor): Int32Array {
  if (t.dtype !== 'i32') throw new Error(`tensor ${t.name} is ${t.dtype}; expected i32`);
  return alignedView(t.bytes, 4, (b, o, n) => new Int32Array(b, o, n));
}
