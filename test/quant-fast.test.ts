// The fast load-time quantisers (engine/quant/int8-rows.ts, nf4-blocks.ts) against the implementations they
// replaced, kept here verbatim as the reference: byte-identical codes and scales on random matrices (f32 values,
// and f16 bits against the old functions fed the same weights decoded to f32), with the cases the fast paths
// treat specially — exact ties of the rounding, zero rows and blocks, f16 subnormals, partial last words and
// blocks, odd widths — and the same refusals. The yielding forms give the same output and let the event loop run.

import { strict as assert } from 'assert';
import { f16BitsToF32, f16ToF32, f32ToF16 } from '../engine/loader/dtype';
import { f16BitsAtLeast } from '../engine/quant/f16-scale';
import { quantizeRowsInt8, quantizeRowsInt8Yielding } from '../engine/quant/int8-rows';
import { NF4_CODES, quantizeNf4, quantizeNf4Yielding } from '../engine/quant/nf4-blocks';
import { WEIGHTS_PER_YIELD } from '../engine/quant/weight-values';
import { turnsDuring } from './event-loop-turns';

// ---- The reference: the quantisers as they were before the fast paths (commit b8412d6), unchanged. ----

function oldQuantizeRowsInt8(w: Float32Array, n: number, k: number) {
  if (w.length !== n * k) throw new RangeError(`int8 quantiser: ${w.length} values are not ${n} rows of ${k}`);
  const q = new Int8Array(n * k);
  const scaleBits = new Uint16Array(n);
  const scales = new Float32Array(n);
  for (let r = 0; r < n; r++) {
    const base = r * k;
    let max = 0;
    for (let i = 0; i < k; i++) {
      const a = Math.abs(w[base + i]);
      if (!(a <= max)) max = a;
    }
    if (!Number.isFinite(max)) throw new RangeError(`int8 quantiser: row ${r} holds a non-finite weight`);
    const bits = f16BitsAtLeast(max / 127);
    const scale = f16BitsToF32(bits);
    scaleBits[r] = bits;
    scales[r] = scale;
    if (scale === 0) continue;
    const inv = 1 / scale;
    for (let i = 0; i < k; i++) q[base + i] = Math.max(-127, Math.min(127, Math.round(w[base + i] * inv)));
  }
  return { q, scaleBits, scales };
}

const OLD_MID = NF4_CODES.slice(1).map((c, j) => (c + NF4_CODES[j]) / 2);

function oldNearestCode(v: number): number {
  let lo = 0;
  let hi = 15;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (v <= OLD_MID[m]) hi = m;
    else lo = m + 1;
  }
  return lo;
}

function oldQuantizeNf4(w: Float32Array) {
  const blocks = Math.ceil(w.length / 64);
  const words = new Uint32Array(blocks * 8);
  const absmaxBits = new Uint16Array(blocks);
  for (let b = 0; b < blocks; b++) {
    const from = b * 64;
    const to = Math.min(w.length, from + 64);
    let max = 0;
    for (let e = from; e < to; e++) {
      const a = Math.abs(w[e]);
      if (!(a <= max)) max = a;
    }
    if (!Number.isFinite(max)) throw new RangeError(`nf4 quantiser: block ${b} holds a non-finite weight`);
    const bits = f16BitsAtLeast(max);
    absmaxBits[b] = bits;
    const inv = max === 0 ? 0 : 1 / f16BitsToF32(bits);
    for (let e = from; e < from + 64; e++) {
      const code = e < to ? oldNearestCode(w[e] * inv) : 7;
      words[e >> 3] |= code << (4 * (e & 7));
    }
  }
  return { words: words.subarray(0, Math.ceil(w.length / 8)), absmaxBits };
}

// ---- Inputs ----

function seeded(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/**
 * n rows of k: rows of mixed magnitudes with outliers, a zero row, a row of f16 subnormals, a row of exact
 * ties (w / scale = j + 1/2 for both signs) and one whose scale is a subnormal f16.
 */
function matrix(n: number, k: number, seed: number): Float32Array {
  const rnd = seeded(seed);
  const w = new Float32Array(n * k);
  for (let r = 0; r < n; r++) {
    const mag = 10 ** (-3 + 4 * rnd());
    for (let i = 0; i < k; i++) {
      const g = (rnd() + rnd() + rnd() - 1.5) * mag;
      w[r * k + i] = rnd() < 0.01 ? g * 20 : g;
    }
  }
  if (n > 3) {
    w.fill(0, k, 2 * k); // row 1: zeros
    for (let i = 0; i < k; i++) w[2 * k + i] = (rnd() - 0.5) * 2 ** -16; // row 2: f16 subnormals
    // Row 3: scale 2^-7 (its max is 127 * 2^-7), every other weight an exact half step, both signs.
    for (let i = 0; i < k; i++) w[3 * k + i] = i === 0 ? 127 * 2 ** -7 : ((Math.floor(rnd() * 250) - 125 + 0.5) * 2 ** -7);
  }
  if (n > 4) for (let i = 0; i < k; i++) w[4 * k + i] = (rnd() - 0.5) * 1e-5; // row 4: a subnormal scale
  return w;
}

/** The weights rounded to f16: their bits, and the same values as f32 (what the old functions were given). */
function asF16(w: Float32Array): { bits: Uint16Array; values: Float32Array } {
  const bits = f32ToF16(w);
  return { bits, values: f16ToF32(bits) };
}

const bytesOf = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

const SHAPES: [number, number][] = [
  [1, 1],
  [7, 37],
  [43, 96],
  [64, 200],
  [130, 513],
];

describe('fast quantisers: byte-identical to the implementations they replaced', () => {
  it('int8: the same codes and scales from f32 values and from f16 bits, on random matrices of many shapes', () => {
    SHAPES.forEach(([n, k], s) => {
      const w = matrix(n, k, 100 + s);
      const want = oldQuantizeRowsInt8(w, n, k);
      const got = quantizeRowsInt8(w, n, k);
      assert.ok(bytesOf(got.q).equals(bytesOf(want.q)), `${n}x${k} f32: codes differ`);
      assert.deepEqual(Array.from(got.scaleBits), Array.from(want.scaleBits), `${n}x${k} f32: scales`);
      assert.deepEqual(Array.from(got.scales), Array.from(want.scales));
      const h = asF16(w);
      const wantH = oldQuantizeRowsInt8(h.values, n, k);
      const gotH = quantizeRowsInt8(h.bits, n, k);
      assert.ok(bytesOf(gotH.q).equals(bytesOf(wantH.q)), `${n}x${k} f16: codes differ`);
      assert.deepEqual(Array.from(gotH.scaleBits), Array.from(wantH.scaleBits), `${n}x${k} f16: scales`);
    });
  });

  it('f16 bits read two at a time or one at a time (unaligned views, odd output offsets) give the same output', async () => {
    // bitPairs needs a 4-byte aligned view: a view at byte offset 2 takes the one-at-a-time loops.
    const n = 43;
    const k = 96;
    const h = asF16(matrix(n, k, 77));
    const shifted = new Uint16Array(n * k + 1);
    shifted.set(h.bits, 1);
    const unaligned = shifted.subarray(1);
    assert.equal(unaligned.byteOffset % 4, 2);
    const want8 = oldQuantizeRowsInt8(h.values, n, k);
    for (const bits of [h.bits, unaligned]) assert.ok(bytesOf(quantizeRowsInt8(bits, n, k).q).equals(bytesOf(want8.q)), `int8, view at byte ${bits.byteOffset}`);
    // Codes written at an odd byte offset (a group's later matrix can start so) take the one-at-a-time store.
    const buffer = new Int8Array(n * k + 1);
    const out = { q: buffer.subarray(1), scaleBits: new Uint16Array(n), scales: new Float32Array(n) };
    await quantizeRowsInt8Yielding(h.bits, n, k, out);
    assert.ok(bytesOf(out.q).equals(bytesOf(want8.q)), 'int8, codes at an odd offset');
    const want4 = oldQuantizeNf4(h.values);
    for (const bits of [h.bits, unaligned]) assert.ok(bytesOf(quantizeNf4(bits).words).equals(bytesOf(want4.words)), `nf4, view at byte ${bits.byteOffset}`);
  });

  it('int8: exact ties round as Math.round does (up), for both signs', () => {
    // Row 3 of matrix(): w / scale = j + 1/2 exactly. Math.round(-2.5) is -2, and the fast path must agree.
    const n = 5;
    const k = 64;
    const w = matrix(n, k, 7);
    const got = quantizeRowsInt8(w, n, k);
    assert.equal(got.scales[3], 2 ** -7);
    let ties = 0;
    for (let i = 1; i < k; i++) {
      const x = w[3 * k + i] / got.scales[3];
      assert.equal(x - Math.floor(x), 0.5, 'a tie');
      assert.equal(got.q[3 * k + i], Math.round(x), `weight ${i}: ${x}`);
      ties++;
    }
    assert.equal(ties, k - 1);
    assert.ok(bytesOf(got.q).equals(bytesOf(oldQuantizeRowsInt8(w, n, k).q)));
  });

  it('nf4: the same words and absmaxes from f32 values and from f16 bits, any length (partial words and blocks)', () => {
    for (const [s, length] of [1, 7, 8, 63, 64, 65, 100, 1000, 4096, 64 * 1001 + 24].entries()) {
      const w = matrix(1, length, 200 + s);
      // Spread magnitudes over the blocks too.
      for (let e = 0; e < length; e++) w[e] *= 10 ** (((e >> 6) % 5) - 2);
      if (length > 200) w.fill(0, 64, 128); // a zero block
      const want = oldQuantizeNf4(w);
      const got = quantizeNf4(w);
      assert.ok(bytesOf(got.words).equals(bytesOf(want.words)), `${length} f32: words differ`);
      assert.deepEqual(Array.from(got.absmaxBits), Array.from(want.absmaxBits), `${length} f32: absmaxes`);
      const h = asF16(w);
      const wantH = oldQuantizeNf4(h.values);
      const gotH = quantizeNf4(h.bits);
      assert.ok(bytesOf(gotH.words).equals(bytesOf(wantH.words)), `${length} f16: words differ`);
      assert.deepEqual(Array.from(gotH.absmaxBits), Array.from(wantH.absmaxBits), `${length} f16: absmaxes`);
    }
  });

  it('nf4: values on and around every midpoint between codes get the old code (ties to the lower)', () => {
    // One block per midpoint: absmax 1 (the first weight), then the midpoint itself and its neighbours.
    const w: number[] = [];
    for (const m of OLD_MID) {
      const block = [1, m, Math.fround(m), m + 1e-12, m - 1e-12, m + 2 ** -40, m - 2 ** -40];
      while (block.length < 64) block.push(m * (1 + (block.length - 32) * 1e-9));
      w.push(...block);
    }
    const f = Float32Array.from(w);
    assert.ok(bytesOf(quantizeNf4(f).words).equals(bytesOf(oldQuantizeNf4(f).words)));
  });

  it('refuse non-finite weights with the same errors, from f32 values and from f16 bits', () => {
    for (const bad of [Infinity, -Infinity, NaN]) {
      const w = matrix(3, 40, 9);
      w[2 * 40 + 5] = bad;
      const h = f32ToF16(w);
      // The reference refused a NaN only as the row's (block's) last weight: a later weight replaced it as the
      // maximum and it quantised to 0 silently. Now a NaN anywhere is refused (and the reference shows the gap).
      if (bad === bad) assert.throws(() => oldQuantizeRowsInt8(w, 3, 40), /row 2 holds a non-finite weight/);
      else assert.doesNotThrow(() => oldQuantizeRowsInt8(w, 3, 40));
      assert.throws(() => quantizeRowsInt8(w, 3, 40), /int8 quantiser: row 2 holds a non-finite weight/);
      assert.throws(() => quantizeRowsInt8(h, 3, 40), /int8 quantiser: row 2 holds a non-finite weight/);
      assert.throws(() => quantizeNf4(w), /nf4 quantiser: block 1 holds a non-finite weight/);
      assert.throws(() => quantizeNf4(h), /nf4 quantiser: block 1 holds a non-finite weight/);
    }
    assert.throws(() => quantizeRowsInt8(new Uint16Array(10), 3, 4), /10 values are not 3 rows of 4/);
  });
});

describe('fast quantisers: yielding to the event loop', function () {
  this.timeout(60_000);
  // Three pieces of work and a bit: 3.25 x WEIGHTS_PER_YIELD weights.
  const n = 13;
  const k = WEIGHTS_PER_YIELD / 4;
  const w = asF16(matrix(n, k, 31)).bits;

  it('int8: the same output as in one piece, with the event loop run between pieces', async () => {
    const want = quantizeRowsInt8(w, n, k);
    let got: Awaited<ReturnType<typeof quantizeRowsInt8Yielding>> | undefined;
    const { turns } = await turnsDuring(async () => (got = await quantizeRowsInt8Yielding(w, n, k)));
    assert.ok(bytesOf(got!.q).equals(bytesOf(want.q)));
    assert.deepEqual(Array.from(got!.scaleBits), Array.from(want.scaleBits));
    assert.ok(turns >= 3, `the event loop ran ${turns} times during the quantisation`);
  });

  it('nf4: the same output as in one piece, with the event loop run between pieces', async () => {
    const want = quantizeNf4(w);
    let got: Awaited<ReturnType<typeof quantizeNf4Yielding>> | undefined;
    const { turns } = await turnsDuring(async () => (got = await quantizeNf4Yielding(w)));
    assert.ok(bytesOf(got!.words).equals(bytesOf(want.words)));
    assert.deepEqual(Array.from(got!.absmaxBits), Array.from(want.absmaxBits));
    assert.ok(turns >= 3, `the event loop ran ${turns} times during the quantisation`);
  });

  it('refuse an output that does not fit the input', async () => {
    await assert.rejects(quantizeRowsInt8Yielding(new Float32Array(8), 2, 4, { q: new Int8Array(4), scaleBits: new Uint16Array(2), scales: new Float32Array(2) }), /output does not hold 2 rows of 4/);
    await assert.rejects(quantizeNf4Yielding(new Float32Array(128), { words: new Uint32Array(8), absmaxBits: new Uint16Array(2) }), /output does not hold 128 weights/);
  });
});
