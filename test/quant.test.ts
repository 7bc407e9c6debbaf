// The load-time quantisers of precision 'int8' and 'nf4' (engine/quant/): round trips within the scheme's
// bound, f16 scales that never clamp, the NF4 code book's nearest-code choice, and the GPU group layout
// (codes back to back, scales after them where the kernels look).

import { strict as assert } from 'assert';
import { f16BitsToF32, f32ToF16Bits } from '../engine/loader/dtype';
import { f16BitsAtLeast } from '../engine/quant/f16-scale';
import { dequantizeRowsInt8, quantizeRowsInt8 } from '../engine/quant/int8-rows';
import { dequantizeNf4, NF4_BLOCK, NF4_CODES, quantizeNf4 } from '../engine/quant/nf4-blocks';
import { packQuantizedGroup } from '../engine/quant/gpu-matrix-group';

function seeded(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

describe('quantisation scales: f16, rounded up', () => {
  it('gives the smallest f16 at or above the value, exact f16 values unchanged, and refuses what f16 cannot hold', () => {
    for (const x of [0, 1, 0.1, 1 / 127, 3.3e-6, 6.2e-5, 1000.3, 65504]) {
      const got = f16BitsToF32(f16BitsAtLeast(x));
      assert.ok(got >= x, `${x} -> ${got}`);
      if (x > 0) assert.ok(f16BitsToF32(f16BitsAtLeast(x) - 1) < x, `${x}: ${got} is not the smallest f16 >= it`);
    }
    assert.equal(f16BitsAtLeast(0.5), f32ToF16Bits(0.5));
    assert.throws(() => f16BitsAtLeast(70000), /beyond the f16 range/);
    assert.throws(() => f16BitsAtLeast(NaN), /finite/);
  });
});

describe('int8 quantiser (per output row)', () => {
  it('round-trips every weight within half its row scale, extremes to ±127, zero rows as zero', () => {
    const n = 5;
    const k = 300;
    const rnd = seeded(7);
    // Rows of very different magnitudes (down to f16 subnormal scales): a per-row scale keeps small rows precise.
    const w = Float32Array.from({ length: n * k }, (_, j) => (j < k ? 0 : (rnd() - 0.5) * 10 ** (((j / k) | 0) * 1.5 - 6)));
    const { q, scales, scaleBits } = quantizeRowsInt8(w, n, k);
    const back = dequantizeRowsInt8(q, scales, k);
    assert.equal(scales[0], 0);
    for (let r = 0; r < n; r++) {
      let max = 0;
      for (let i = 0; i < k; i++) max = Math.max(max, Math.abs(w[r * k + i]));
      assert.equal(scales[r], f16BitsToF32(scaleBits[r]), 'the scale is an f16 value');
      assert.ok(scales[r] >= max / 127 && (max === 0 || f16BitsToF32(scaleBits[r] - 1) < max / 127), `row ${r}: scale ${scales[r]} for max ${max}`);
      let worst = 0;
      for (let i = 0; i < k; i++) {
        const e = Math.abs(back[r * k + i] - w[r * k + i]);
        worst = Math.max(worst, e);
        assert.ok(e <= scales[r] * 0.5 * (1 + 1e-6), `row ${r} input ${i}: error ${e} over half the scale ${scales[r]}`);
        assert.ok(Math.abs(q[r * k + i]) <= 127);
      }
      if (r > 0) assert.ok(worst > 0, `row ${r}: quantisation should lose something`);
      // A normal f16 scale overshoots by less than one part in 1024: the largest weight lands on ±126 or ±127.
      if (scales[r] >= 2 ** -14) {
        assert.ok(Array.from(q.subarray(r * k, r * k + k)).some((v) => Math.abs(v) >= 126), `row ${r}: its largest weight maps near ±127`);
      }
    }
  });

  it('names bad input: a shape that does not match, a non-finite weight', () => {
    assert.throws(() => quantizeRowsInt8(new Float32Array(10), 3, 4), /10 values are not 3 rows of 4/);
    assert.throws(() => quantizeRowsInt8(Float32Array.of(1, NaN), 1, 2), /row 0 holds a non-finite weight/);
  });
});

describe('nf4 quantiser (64-weight blocks)', () => {
  it('picks the nearest code of w / absmax, within half the widest code gap times absmax, and packs 8 codes a word', () => {
    const rnd = seeded(3);
    // 3 whole blocks and a partial one; blocks of different magnitudes; one all-zero block.
    const len = 3 * NF4_BLOCK + 20;
    const w = Float32Array.from({ length: len }, (_, e) => {
      const b = Math.floor(e / NF4_BLOCK);
      return b === 1 ? 0 : (rnd() - 0.5) * 10 ** (b - 2);
    });
    const q = quantizeNf4(w);
    assert.equal(q.words.length, Math.ceil(len / 8));
    assert.equal(q.absmaxBits.length, 4);
    const back = dequantizeNf4(q, len);
    const gaps = NF4_CODES.slice(1).map((c, j) => c - NF4_CODES[j]);
    const halfGap = Math.max(...gaps) / 2;
    for (let b = 0; b < 4; b++) {
      const from = b * NF4_BLOCK;
      const to = Math.min(len, from + NF4_BLOCK);
      let max = 0;
      for (let e = from; e < to; e++) max = Math.max(max, Math.abs(w[e]));
      const absmax = f16BitsToF32(q.absmaxBits[b]);
      assert.ok(absmax >= max && absmax <= max * (1 + 2 ** -10), `block ${b}: absmax ${absmax} for ${max}`);
      for (let e = from; e < to; e++) {
        const code = (q.words[e >> 3] >>> (4 * (e & 7))) & 15;
        // Nearest: no other code is closer to w / absmax.
        const v = absmax === 0 ? 0 : w[e] / absmax;
        for (const c of NF4_CODES) assert.ok(Math.abs(v - NF4_CODES[code]) <= Math.abs(v - c) + 1e-7, `weight ${e}: code ${code} for ${v}, ${c} is nearer`);
        assert.ok(Math.abs(back[e] - w[e]) <= halfGap * absmax * (1 + 1e-6) + 1e-12, `weight ${e}`);
      }
    }
    // The all-zero block: absmax 0 and code 7 (the exact zero) everywhere.
    assert.equal(q.absmaxBits[1], 0);
    for (let e = NF4_BLOCK; e < 2 * NF4_BLOCK; e++) assert.equal(back[e], 0);
    assert.equal(NF4_CODES[7], 0);
  });
});

describe('GPU layout of a quantised matrix group', () => {
  const mats = [
    { name: 'a', n: 3, k: 64, data: Float32Array.from({ length: 3 * 64 }, (_, i) => Math.sin(i)) },
    { name: 'b', n: 2, k: 32, data: Float32Array.from({ length: 2 * 32 }, (_, i) => Math.cos(i) * 4) },
  ];

  it('int8: codes of both matrices back to back, one scale per row at its 64-aligned virtual row', async () => {
    const p = await packQuantizedGroup(mats, 'int8', 64);
    const elements = 3 * 64 + 2 * 32;
    assert.equal(p.scaleWord, elements / 4);
    const bytes = new Int8Array(p.words.buffer, p.words.byteOffset, elements);
    const half = (row: number) => (p.words[p.scaleWord + (row >> 1)] >>> (16 * (row & 1))) & 0xffff;
    const qa = quantizeRowsInt8(mats[0].data, 3, 64);
    const qb = quantizeRowsInt8(mats[1].data, 2, 32);
    assert.deepEqual(Array.from(bytes.subarray(0, 192)), Array.from(qa.q));
    assert.deepEqual(Array.from(bytes.subarray(192)), Array.from(qb.q));
    assert.deepEqual([0, 1, 2].map(half), Array.from(qa.scaleBits));
    assert.deepEqual([64, 65].map(half), Array.from(qb.scaleBits), "b's rows start at virtual row 64");
    assert.equal(half(3), 0, 'rows between segments have no scale');
    assert.equal(p.words.length, p.scaleWord + 33);
    assert.equal(p.modelBytes, elements + 2 * 5);
  });

  it('nf4: the group as one flat array of 64-weight blocks, absmaxes from an even word', async () => {
    const p = await packQuantizedGroup(mats, 'nf4', 64);
    const flat = new Float32Array([...mats[0].data, ...mats[1].data]);
    const q = quantizeNf4(flat);
    assert.equal(p.scaleWord, 32); // 256 weights / 8 per word
    assert.deepEqual(Array.from(p.words.subarray(0, 32)), Array.from(q.words));
    for (let b = 0; b < 4; b++) assert.equal((p.words[32 + (b >> 1)] >>> (16 * (b & 1))) & 0xffff, q.absmaxBits[b]);
    assert.equal(p.modelBytes, 128 + 8);
  });

  it('takes f16 bits as their values (a group mixing both too), and refuses widths the kernels cannot read', async () => {
    // f16-exact values, so the bits and the f32 values are the same weights.
    const exact = mats.map((m) => ({ ...m, data: Float32Array.from(m.data, (v) => f16BitsToF32(f32ToF16Bits(v))) }));
    const bits = exact.map((m) => ({ ...m, data: Uint16Array.from(m.data, (v) => f32ToF16Bits(v)) }));
    for (const format of ['int8', 'nf4'] as const) {
      const want = await packQuantizedGroup(exact, format, 64);
      assert.deepEqual(Array.from((await packQuantizedGroup(bits, format, 64)).words), Array.from(want.words), `${format}: f16 bits`);
      assert.deepEqual(Array.from((await packQuantizedGroup([bits[0], exact[1]], format, 64)).words), Array.from(want.words), `${format}: mixed`);
    }
    await assert.rejects(packQuantizedGroup([{ name: 'odd', n: 1, k: 30, data: new Float32Array(30) }], 'nf4', 64), /odd: input width 30/);
    await assert.rejects(packQuantizedGroup([{ name: 'f64', n: 1, k: 32, data: new Float64Array(32) as never }], 'int8', 64), /f64: quantising needs f32 values or f16 bits/);
  });
});
