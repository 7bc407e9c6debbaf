// AssemblyScript source of the CPU backend's WebAssembly SIMD kernels (built by scripts/build-kernels.js into
// dist/engine/cpu/kernels.wasm; excluded from the TypeScript build). Every function works on raw addresses in
// one shared memory that the host lays out; nothing here allocates, so the module has no runtime and no data
// segments, and every worker thread instantiates it over the same memory.
//
// Matrices are stored in panels of 8 output rows: panel p holds rows 8p..8p+7 as [k][8] (16 bytes per input
// index in f16, 32 in f32), so one vector load gives one input's weights for 8 rows and a product is 8-wide
// multiply-adds against one broadcast input: no horizontal sums, and the same loop serves one token (decode)
// and many (prefill, batched decode: each weight is read once per 4 tokens). Every path sums in input order,
// so results are the same bit for bit whatever the batch, its split into chunks, or the thread count.

// ---- f16 and int8 weights ----------------------------------------------------------------------------------------

// An f16 becomes an f32 with three vector instructions: load four halves sign-extended to 32 bits, shift left by
// 13, clear the three copies of the sign that land in the exponent. The result is the f16's value times 2^-112
// (exponent bias 15 vs 127, denormals included); the missing 2^112 is applied once to each finished sum.
const F16_SCALE: f32 = 5.192296858534828e33; // 2^112

/** Weights 0..3 of the 8 f16 at p, as f32 times 2^-112. */
@inline function halfLo(p: usize): v128 {
  return v128.and(i32x4.shl(v128.load16x4_s(p), 13), i32x4.splat(0x8fffffff));
}

/** Weights 4..7. */
@inline function halfHi(p: usize): v128 {
  return v128.and(i32x4.shl(v128.load16x4_s(p, 8), 13), i32x4.splat(0x8fffffff));
}

// int8 panels (precision 'int8') hold, per pair of inputs (2j, 2j+1), 16 signed bytes: rows 0..7 each as the
// pair [q[row][2j], q[row][2j+1]]; then the panel's 8 row scales as f32 (w[row][i] = q[row][i] * scale[row]).
// Each call first quantizes its tokens' inputs to i16 with one scale per token (quantizeInputs), so a product is
// integer dot products of pairs (i32x4.dot_i16x8_s: 8 multiply-adds per instruction) summed exactly in i32; the
// row and token scales apply once to each finished sum. Integer sums are exact, so every path gives the same bits.
// Why not relaxed SIMD's i8 dot product (i16x8.relaxed_dot_i8x16_i7x16_s, 16 products an instruction; 1.35-1.45x
// the multiply-adds per CPU second of dot_i16x8_s + add in a bare loop here): one operand must be 0..127, so the
// inputs would be 7-bit (x + 64, a scale per block). Emulated in the input quantizer, the bundled model's
// perplexity held but the golden logits' error doubled past test/golden-cpu-int8.test.ts's bounds on every
// version (README, CPU backend, "int8 prefill: threads and the product").

// The module is built twice (scripts/build-kernels.sh): plain SIMD, and with relaxed SIMD, whose fused
// multiply-add does a product and a sum in one instruction (wasm-kernels.ts picks the one the runtime has).
@inline function madd(a: v128, b: v128, acc: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, acc);
  return f32x4.add(acc, f32x4.mul(a, b));
}

/** 1 where madd fuses (the relaxed-SIMD build), 0 in the plain one: the native f16 products sum the same way. */
export function fusedMultiplyAdd(): i32 {
  return ASC_FEATURE_RELAXED_SIMD ? 1 : 0;
}

// exp over four lanes: exp(x) = 2^n e^r with n = round(x / ln 2) and |r| <= ln 2 / 2, e^r by Cephes' degree-7
// polynomial (within 2 ulp of the true value over the clamped range), 2^n put into the exponent bits. The
// per-token RWKV-7 work calls exp four times per channel (three sigmoids and the decay); one scalar exp per
// lane took as long as a quarter of the matrix products in prefill. Inputs are clamped to [-87, 88], where
// 2^n stays a normal f32: exp(-87) = 1.6e-38 stands for 0 and exp(88) = 1.7e38 for +inf, which the sigmoid
// and tanh built on it turn into their exact limits 0, 1, -1.
@inline function vexp(x: v128): v128 {
  x = f32x4.min(f32x4.max(x, f32x4.splat(-87)), f32x4.splat(88));
  const n = f32x4.nearest(f32x4.mul(x, f32x4.splat(1.44269504088896341)));
  // r = x - n ln 2 in two steps (ln 2's leading bits exactly, then the rest), so r keeps its low bits.
  let r = madd(n, f32x4.splat(-0.693359375), x);
  r = madd(n, f32x4.splat(2.12194440e-4), r);
  let p = f32x4.splat(1.9875691500e-4);
  p = madd(p, r, f32x4.splat(1.3981999507e-3));
  p = madd(p, r, f32x4.splat(8.3334519073e-3));
  p = madd(p, r, f32x4.splat(4.1665795894e-2));
  p = madd(p, r, f32x4.splat(1.6666665459e-1));
  p = madd(p, r, f32x4.splat(5.0000001201e-1));
  p = madd(p, f32x4.mul(r, r), f32x4.add(r, f32x4.splat(1)));
  const pow2n = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), i32x4.splat(127)), 23);
  return f32x4.mul(p, pow2n);
}

@inline function vsigmoid(x: v128): v128 {
  const one = f32x4.splat(1);
  return f32x4.div(one, f32x4.add(one, vexp(f32x4.neg(x))));
}

/** tanh(x) = 1 - 2 / (e^2x + 1): no cancellation for large |x|, exactly ±1 at the clamp. */
@inline function vtanh(x: v128): v128 {
  const one = f32x4.splat(1);
  return f32x4.sub(one, f32x4.div(f32x4.splat(2), f32x4.add(vexp(f32x4.add(x, x)), one)));
}

/** exp of n floats at x into out (n a multiple of 4): the kernels' exp, exported for its accuracy test. */
export function expInto(x: usize, n: i32, out: usize): void {
  for (let i = 0; i < n; i += 4) v128.store(out + (<usize>i << 2), vexp(v128.load(x + (<usize>i << 2))));
}

/**
 * What output 'top' needs of a logits row besides its best entries (top-logits-cpu.ts): at out, the largest value
 * (f32, -Infinity when none), the count of values above -Infinity (i32; NaN is not one), and the sum of
 * exp(x - largest) over them (f64, each term from the vector exp, summed in f64 per lane). Math.exp over a
 * 65,536-token row took 1.2-1.5 ms a decode step on the host; this takes a small fraction of it.
 */
export function softmaxStats(x: usize, n: i32, out: usize): void {
  const negInf = f32x4.splat(-Infinity);
  let mv = negInf;
  let cv = i32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const v = v128.load(x + (<usize>i << 2));
    mv = f32x4.pmax(mv, v); // NaN in v keeps mv
    cv = i32x4.sub(cv, f32x4.gt(v, negInf)); // a true lane is -1
  }
  let m: f32 = max(max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)), max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)));
  let count: i32 = i32x4.extract_lane(cv, 0) + i32x4.extract_lane(cv, 1) + i32x4.extract_lane(cv, 2) + i32x4.extract_lane(cv, 3);
  for (let j = i; j < n; j++) {
    const v = load<f32>(x + (<usize>j << 2));
    if (v > -Infinity) {
      count++;
      if (v > m) m = v;
    }
  }
  let sum: f64 = 0;
  if (count > 0) {
    const mx = f32x4.splat(m);
    let lo = f64x2.splat(0);
    let hi = f64x2.splat(0);
    i = 0;
    for (; i + 4 <= n; i += 4) {
      const v = v128.load(x + (<usize>i << 2));
      const e = v128.and(vexp(f32x4.sub(v, mx)), f32x4.gt(v, negInf));
      lo = f64x2.add(lo, f64x2.promote_low_f32x4(e));
      hi = f64x2.add(hi, f64x2.promote_low_f32x4(v128.shuffle<u32>(e, e, 2, 3, 0, 1)));
    }
    sum = f64x2.extract_lane(lo, 0) + f64x2.extract_lane(lo, 1) + f64x2.extract_lane(hi, 0) + f64x2.extract_lane(hi, 1);
    for (let j = i; j < n; j++) {
      const v = load<f32>(x + (<usize>j << 2));
      if (v > -Infinity) sum += <f64>f32x4.extract_lane(vexp(f32x4.splat(v - m)), 0);
    }
  }
  store<f32>(out, count > 0 ? m : -Infinity);
  store<i32>(out, count, 4);
  store<f64>(out, sum, 8);
}

// Output 'top's best entries of a logits row (top-logits-cpu.ts reduceTop, which this replaced on the host: its
// JavaScript heap over 65,536 logits took ~0.5 ms of a ~4 ms int8 decode step). A min-heap of `cap` (value, row)
// pairs, the worst (smallest value, then highest row) at its root, filled with the first `cap` candidates in row
// order; after that four values at a time are compared with the root, and only a block holding a larger one is
// looked at value by value. An equal value never displaces (rows come in ascending order), so ties keep the lower
// row, as reduceTop's. NaN and -Infinity are never candidates.

/** Whether (v1, r1) ranks below (v2, r2): a smaller value, or the same value at a higher row. */
@inline function worse(v1: f32, r1: i32, v2: f32, r2: i32): bool {
  return v1 < v2 || (v1 == v2 && r1 > r2);
}

/** Puts (v, r) at the heap's root position and sifts it down among the first `size` entries. */
@inline function siftDown(hv: usize, hr: usize, size: i32, v: f32, r: i32): void {
  let j = 0;
  for (;;) {
    const a = 2 * j + 1;
    if (a >= size) break;
    const b = a + 1;
    let c = a;
    if (b < size && worse(load<f32>(hv + (<usize>b << 2)), load<i32>(hr + (<usize>b << 2)), load<f32>(hv + (<usize>a << 2)), load<i32>(hr + (<usize>a << 2)))) c = b;
    const cv = load<f32>(hv + (<usize>c << 2));
    const cr = load<i32>(hr + (<usize>c << 2));
    if (!worse(cv, cr, v, r)) break; // the worse child already ranks above (v, r)
    store<f32>(hv + (<usize>j << 2), cv);
    store<i32>(hr + (<usize>j << 2), cr);
    j = c;
  }
  store<f32>(hv + (<usize>j << 2), v);
  store<i32>(hr + (<usize>j << 2), r);
}

/** Row i of a full heap: replaces the root when the value is larger than the root's. */
@inline function offer(x: usize, i: i32, hv: usize, hr: usize, cap: i32): void {
  const v = load<f32>(x + (<usize>i << 2));
  if (v > load<f32>(hv)) siftDown(hv, hr, cap, v, i);
}

/**
 * The `cap` best entries of the n floats at x (all candidates when fewer), best first, ties by lower row: values
 * at hv (f32) and rows at hr (i32), cap entries of room each. Returns how many there are.
 */
export function topEntries(x: usize, n: i32, cap: i32, hv: usize, hr: usize): i32 {
  let size = 0;
  let i = 0;
  // Filling: every candidate goes in, sifted up (a parent ranks below its children).
  for (; i < n && size < cap; i++) {
    const v = load<f32>(x + (<usize>i << 2));
    if (!(v > -Infinity)) continue;
    let j = size++;
    while (j > 0) {
      const parent = (j - 1) >> 1;
      const pv = load<f32>(hv + (<usize>parent << 2));
      const pr = load<i32>(hr + (<usize>parent << 2));
      if (worse(pv, pr, v, i)) break;
      store<f32>(hv + (<usize>j << 2), pv);
      store<i32>(hr + (<usize>j << 2), pr);
      j = parent;
    }
    store<f32>(hv + (<usize>j << 2), v);
    store<i32>(hr + (<usize>j << 2), i);
  }
  if (size == cap && cap > 0) {
    for (; i + 4 <= n; i += 4) {
      // NaN compares false, so a block of NaN and -Infinity is skipped here too.
      if (!v128.any_true(f32x4.gt(v128.load(x + (<usize>i << 2)), f32x4.splat(load<f32>(hv))))) continue;
      offer(x, i, hv, hr, cap);
      offer(x, i + 1, hv, hr, cap);
      offer(x, i + 2, hv, hr, cap);
      offer(x, i + 3, hv, hr, cap);
    }
    for (; i < n; i++) offer(x, i, hv, hr, cap);
  }
  // Best first: the root (the worst left) goes to the end, the last entry sifts down from the root.
  for (let end = size - 1; end > 0; end--) {
    const v = load<f32>(hv);
    const r = load<i32>(hr);
    siftDown(hv, hr, end, load<f32>(hv + (<usize>end << 2)), load<i32>(hr + (<usize>end << 2)));
    store<f32>(hv + (<usize>end << 2), v);
    store<i32>(hr + (<usize>end << 2), r);
  }
  return size;
}

/** act: 0 none, 1 tanh, 2 sigmoid, 3 relu squared. */
@inline function activate(v: v128, act: i32): v128 {
  if (act == 1) return vtanh(v);
  if (act == 2) return vsigmoid(v);
  if (act == 3) {
    const r = f32x4.max(v, f32x4.splat(0));
    return f32x4.mul(r, r);
  }
  return v;
}

/**
 * Stores 8 finished sums, times their rows' scales (sl: rows 0..3, sh: 4..7), into y[row..row+8), fewer past the
 * matrix's last row.
 */
@inline function store8(y: usize, lo: v128, hi: v128, sl: v128, sh: v128, act: i32, accum: i32, valid: i32): void {
  lo = activate(f32x4.mul(lo, sl), act);
  hi = activate(f32x4.mul(hi, sh), act);
  if (valid >= 8) {
    if (accum) {
      lo = f32x4.add(lo, v128.load(y));
      hi = f32x4.add(hi, v128.load(y, 16));
    }
    v128.store(y, lo);
    v128.store(y, hi, 16);
    return;
  }
  store8Slow(y, lo, hi, accum, valid);
}

/** The rows of a matrix's last, partial panel, one at a time (values already activated). */
function store8Slow(y: usize, lo: v128, hi: v128, accum: i32, valid: i32): void {
  for (let r = 0; r < valid && r < 8; r++) {
    let v: f32 = r < 4 ? f32x4.extract_lane(lo, 0) : 0;
    // Lanes need constant indices.
    if (r == 1) v = f32x4.extract_lane(lo, 1);
    else if (r == 2) v = f32x4.extract_lane(lo, 2);
    else if (r == 3) v = f32x4.extract_lane(lo, 3);
    else if (r == 4) v = f32x4.extract_lane(hi, 0);
    else if (r == 5) v = f32x4.extract_lane(hi, 1);
    else if (r == 6) v = f32x4.extract_lane(hi, 2);
    else if (r == 7) v = f32x4.extract_lane(hi, 3);
    const at = y + (<usize>r << 2);
    if (accum) v += load<f32>(at);
    store<f32>(at, v);
  }
}

/**
 * y[t][row] = act(sum_i W[row][i] x[t][i]) (+ y[t][row] when accum) for the panels p0..p1 of one matrix and
 * every token t < T. x rows are xs floats apart, y rows ys floats apart; n is the matrix's real row count.
 * kind 0 f16: 16-byte panel entries; 1 f32: 32-byte entries; 2 int8: 8-byte entries and 8 scales per panel;
 * 3 i16: 64 bytes per 4 inputs and 8 scales per panel.
 */
export function matmul(
  w: usize, n: i32, k: i32, kind: i32,
  x: usize, xs: i32, y: usize, ys: i32, T: i32,
  act: i32, accum: i32, p0: i32, p1: i32, scratch: usize,
): void {
  if (kind >= 2) {
    matmulQuantized(kind, w, n, k, x, xs, y, ys, T, act, accum, p0, p1, scratch);
    return;
  }
  const wide = kind;
  const entry: usize = wide ? 32 : 16;
  const panelBytes: usize = <usize>k * entry;
  const scale = f32x4.splat(wide ? 1 : F16_SCALE);
  const xStride: usize = <usize>xs << 2;
  const yStride: usize = <usize>ys << 2;
  let p = p0;
  while (p < p1) {
    const wp = w + <usize>p * panelBytes;
    const row = p << 3;
    const valid = n - row;
    // One token: two panels at once when there are two, so four independent sums hide the add latency.
    if (T == 1) {
      if (!wide && p + 3 < p1) {
        mmOneFourPanels(wp, panelBytes, k, x, y + (<usize>row << 2), scale, scale, act, accum, valid);
        p += 4;
      } else if (p + 1 < p1) {
        mmOneTwoPanels(wp, panelBytes, k, wide, x, y + (<usize>row << 2), scale, scale, act, accum, valid);
        p += 2;
      } else {
        mmTile1(wp, k, wide, x, y + (<usize>row << 2), scale, scale, act, accum, valid);
        p += 1;
      }
      continue;
    }
    // Many tokens: widen the f16 panel once into the thread's scratch (times 2^-112, as the f16 path computes
    // it, so results stay the same bit for bit) and run the f32 loop over it.
    let src = wp;
    let srcWide = wide;
    if (!wide && T >= 8 && scratch != 0) {
      for (let i: usize = 0; i < <usize>k; i++) {
        v128.store(scratch + (i << 5), halfLo(wp + (i << 4)));
        v128.store(scratch + (i << 5), halfHi(wp + (i << 4)), 16);
      }
      src = scratch;
      srcWide = 1;
    }
    let t = 0;
    for (; t + 4 <= T; t += 4) {
      mmTile4(src, k, srcWide, x + <usize>t * xStride, xStride, y + <usize>t * yStride + (<usize>row << 2), yStride, scale, scale, act, accum, valid);
    }
    for (; t < T; t++) {
      mmTile1(src, k, srcWide, x + <usize>t * xStride, y + <usize>t * yStride + (<usize>row << 2), scale, scale, act, accum, valid);
    }
    p += 1;
  }
}

function mmTile4(
  wp: usize, k: i32, wide: i32, x: usize, xStride: usize, y: usize, yStride: usize,
  sl: v128, sh: v128, act: i32, accum: i32, valid: i32,
): void {
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0);
  let a1 = f32x4.splat(0), b1 = f32x4.splat(0);
  let a2 = f32x4.splat(0), b2 = f32x4.splat(0);
  let a3 = f32x4.splat(0), b3 = f32x4.splat(0);
  const x1 = x + xStride;
  const x2 = x1 + xStride;
  const x3 = x2 + xStride;
  if (wide) {
    for (let i: usize = 0; i < <usize>k; i++) {
      const lo = v128.load(wp + (i << 5));
      const hi = v128.load(wp + (i << 5), 16);
      const o = i << 2;
      let s = v128.load32_splat(x + o);
      a0 = madd(lo, s, a0); b0 = madd(hi, s, b0);
      s = v128.load32_splat(x1 + o);
      a1 = madd(lo, s, a1); b1 = madd(hi, s, b1);
      s = v128.load32_splat(x2 + o);
      a2 = madd(lo, s, a2); b2 = madd(hi, s, b2);
      s = v128.load32_splat(x3 + o);
      a3 = madd(lo, s, a3); b3 = madd(hi, s, b3);
    }
  } else {
    for (let i: usize = 0; i < <usize>k; i++) {
      const lo = halfLo(wp + (i << 4));
      const hi = halfHi(wp + (i << 4));
      const o = i << 2;
      let s = v128.load32_splat(x + o);
      a0 = madd(lo, s, a0); b0 = madd(hi, s, b0);
      s = v128.load32_splat(x1 + o);
      a1 = madd(lo, s, a1); b1 = madd(hi, s, b1);
      s = v128.load32_splat(x2 + o);
      a2 = madd(lo, s, a2); b2 = madd(hi, s, b2);
      s = v128.load32_splat(x3 + o);
      a3 = madd(lo, s, a3); b3 = madd(hi, s, b3);
    }
  }
  store8(y, a0, b0, sl, sh, act, accum, valid);
  store8(y + yStride, a1, b1, sl, sh, act, accum, valid);
  store8(y + 2 * yStride, a2, b2, sl, sh, act, accum, valid);
  store8(y + 3 * yStride, a3, b3, sl, sh, act, accum, valid);
}

function mmTile1(wp: usize, k: i32, wide: i32, x: usize, y: usize, sl: v128, sh: v128, act: i32, accum: i32, valid: i32): void {
  // Sums in input order like every other path, so a token's logits do not depend on its place in the batch.
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0);
  const kk = <usize>k;
  if (wide) {
    for (let i: usize = 0; i < kk; i++) {
      const s = v128.load32_splat(x + (i << 2));
      a0 = madd(v128.load(wp + (i << 5)), s, a0);
      b0 = madd(v128.load(wp + (i << 5), 16), s, b0);
    }
  } else {
    for (let i: usize = 0; i < kk; i++) {
      const s = v128.load32_splat(x + (i << 2));
      a0 = madd(halfLo(wp + (i << 4)), s, a0);
      b0 = madd(halfHi(wp + (i << 4)), s, b0);
    }
  }
  store8(y, a0, b0, sl, sh, act, accum, valid);
}

function mmOneTwoPanels(
  wp: usize, panelBytes: usize, k: i32, wide: i32, x: usize, y: usize, sl: v128, sh: v128, act: i32, accum: i32, valid: i32,
): void {
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0);
  let a1 = f32x4.splat(0), b1 = f32x4.splat(0);
  const wq = wp + panelBytes;
  const kk = <usize>k;
  if (wide) {
    for (let i: usize = 0; i < kk; i++) {
      const s = v128.load32_splat(x + (i << 2));
      a0 = madd(v128.load(wp + (i << 5)), s, a0);
      b0 = madd(v128.load(wp + (i << 5), 16), s, b0);
      a1 = madd(v128.load(wq + (i << 5)), s, a1);
      b1 = madd(v128.load(wq + (i << 5), 16), s, b1);
    }
  } else {
    for (let i: usize = 0; i < kk; i++) {
      const s = v128.load32_splat(x + (i << 2));
      a0 = madd(halfLo(wp + (i << 4)), s, a0);
      b0 = madd(halfHi(wp + (i << 4)), s, b0);
      a1 = madd(halfLo(wq + (i << 4)), s, a1);
      b1 = madd(halfHi(wq + (i << 4)), s, b1);
    }
  }
  store8(y, a0, b0, sl, sh, act, accum, valid);
  store8(y + 32, a1, b1, sl, sh, act, accum, valid - 8);
}

/** One token, four f16 panels: four weight streams in flight and eight independent sums. */
function mmOneFourPanels(wp: usize, panelBytes: usize, k: i32, x: usize, y: usize, sl: v128, sh: v128, act: i32, accum: i32, valid: i32): void {
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0);
  let a1 = f32x4.splat(0), b1 = f32x4.splat(0);
  let a2 = f32x4.splat(0), b2 = f32x4.splat(0);
  let a3 = f32x4.splat(0), b3 = f32x4.splat(0);
  const w1 = wp + panelBytes;
  const w2 = w1 + panelBytes;
  const w3 = w2 + panelBytes;
  const kk = <usize>k;
  for (let i: usize = 0; i < kk; i++) {
    const s = v128.load32_splat(x + (i << 2));
    const o = i << 4;
    a0 = madd(halfLo(wp + o), s, a0);
    b0 = madd(halfHi(wp + o), s, b0);
    a1 = madd(halfLo(w1 + o), s, a1);
    b1 = madd(halfHi(w1 + o), s, b1);
    a2 = madd(halfLo(w2 + o), s, a2);
    b2 = madd(halfHi(w2 + o), s, b2);
    a3 = madd(halfLo(w3 + o), s, a3);
    b3 = madd(halfHi(w3 + o), s, b3);
  }
  store8(y, a0, b0, sl, sh, act, accum, valid);
  store8(y + 32, a1, b1, sl, sh, act, accum, valid - 8);
  store8(y + 64, a2, b2, sl, sh, act, accum, valid - 16);
  store8(y + 96, a3, b3, sl, sh, act, accum, valid - 24);
}

// ---- int8 weights ------------------------------------------------------------------------------------------

/**
 * The largest |input| after quantization for k inputs: small enough that no i32 sum of k products with weights
 * in [-127, 127] can overflow (so k up to 16,384 keeps at least 10 bits per input), at most 32767 (i16).
 */
@inline function inputRange(kp: i32): f32 {
  return <f32>min<i32>(32767, <i32>(<f64>2147483647 / (<f64>254 * <f64>kp)));
}

/**
 * Quantizes T rows of k floats (xStride bytes apart) to i16 pairs at q (kp pairs per row, zero-padded) within
 * ±range, with each row's scale (max|x| / range) in the T floats after them.
 */
function quantizeInputs(x: usize, xStride: usize, T: i32, k: i32, kp: i32, q: usize, range: f32): void {
  const rowBytes = <usize>kp << 2;
  const scales = q + <usize>T * rowBytes;
  for (let t = 0; t < T; t++) {
    const xt = x + <usize>t * xStride;
    // The largest |x| on the bits: non-negative floats order like their bit patterns as integers, and the
    // integer max is one instruction where f32x4.max (NaN rules) is several.
    let mv = i32x4.splat(0);
    const absMask = i32x4.splat(0x7fffffff);
    let i = 0;
    for (; i + 4 <= k; i += 4) mv = i32x4.max_s(mv, v128.and(v128.load(xt + (<usize>i << 2)), absMask));
    let m = reinterpret<f32>(max(max(i32x4.extract_lane(mv, 0), i32x4.extract_lane(mv, 1)), max(i32x4.extract_lane(mv, 2), i32x4.extract_lane(mv, 3))));
    for (; i < k; i++) m = max(m, abs(load<f32>(xt + (<usize>i << 2))));
    const inv: f32 = m > 0 ? range / m : 0;
    const qt = q + <usize>t * rowBytes;
    // Eight at a time, narrowed to i16: x * inv rounded to the nearest integer (ties to even, as `nearest`) by
    // adding 1.5 * 2^23, whose sum keeps the integer in its low mantissa bits. |x * inv| <= range (< 2^22) since
    // |x| <= m, so no clamp is needed; this replaced nearest, a clamp and trunc_sat (V8 expands the last into
    // several instructions), a third of a prefill's time on the LoRA matrices. Same values as the scalar tail.
    const iv = f32x4.splat(inv);
    const magic = f32x4.splat(12582912);
    const magicBits = i32x4.splat(0x4b400000);
    i = 0;
    for (; i + 8 <= k; i += 8) {
      const o = <usize>i << 2;
      const u = i32x4.sub(f32x4.add(f32x4.mul(v128.load(xt + o), iv), magic), magicBits);
      const v = i32x4.sub(f32x4.add(f32x4.mul(v128.load(xt + o, 16), iv), magic), magicBits);
      v128.store(qt + (<usize>i << 1), i16x8.narrow_i32x4_s(u, v));
    }
    for (; i < kp * 2; i++) {
      const v: f32 = i < k ? min(range, max(-range, nearest<f32>(load<f32>(xt + (<usize>i << 2)) * inv))) : 0;
      store<i16>(qt + (<usize>i << 1), <i16>v);
    }
    store<f32>(scales + (<usize>t << 2), m > 0 ? m / range : 0);
  }
}

/** Stores 8 integer sums times the token's scale ts and the rows' scales (at sc). */
@inline function storeInt8(y: usize, lo: v128, hi: v128, ts: f32, sc: usize, act: i32, accum: i32, valid: i32): void {
  const t = f32x4.splat(ts);
  store8(y, f32x4.mul(f32x4.convert_i32x4_s(lo), t), f32x4.mul(f32x4.convert_i32x4_s(hi), t), v128.load(sc), v128.load(sc, 16), act, accum, valid);
}

/**
 * matmul for the integer panels, int8 (kind 2) and i16 (kind 3): the tokens' inputs are quantized once into
 * `scratch` (int8 needs T * (2k + 4) + 4 bytes, i16 T * (8 * ceil(k / 4) + 4)); then one token takes four panels
 * at a time (int8 also two), and many tokens take each panel in tiles of four tokens.
 */
function matmulQuantized(
  kind: i32, w: usize, n: i32, k: i32,
  x: usize, xs: i32, y: usize, ys: i32, T: i32,
  act: i32, accum: i32, p0: i32, p1: i32, scratch: usize,
): void {
  if (scratch == 0) unreachable();
  const i16 = kind == 3;
  // Input groups: quads for i16 (two pair products summed in i32), pairs for int8.
  const g = i16 ? (k + 3) >> 2 : (k + 1) >> 1;
  const qRow: usize = <usize>g << (i16 ? 3 : 2);
  const panelBytes: usize = i16 ? (<usize>g << 6) + 64 : (<usize>g << 4) + 32;
  const yStride: usize = <usize>ys << 2;
  quantizeProductInputs(kind, k, x, xs, T, scratch);
  const tsAt = scratch + <usize>T * qRow;
  if (T == 1) {
    const ts = load<f32>(tsAt);
    let p = p0;
    while (p < p1) {
      const wp = w + <usize>p * panelBytes;
      const row = p << 3;
      const valid = n - row;
      const yr = y + (<usize>row << 2);
      if (p + 3 < p1) {
        if (i16) mmI16OneFourPanels(wp, panelBytes, g, scratch, ts, yr, act, accum, valid);
        else mmInt8OneFourPanels(wp, panelBytes, g, scratch, ts, yr, act, accum, valid);
        p += 4;
      } else if (!i16 && p + 1 < p1) {
        mmInt8OneTwoPanels(wp, panelBytes, g, scratch, ts, yr, act, accum, valid);
        p += 2;
      } else {
        if (i16) mmI16Tile1(wp, g, scratch, ts, yr, act, accum, valid);
        else mmInt8Tile1(wp, g, scratch, ts, yr, act, accum, valid);
        p += 1;
      }
    }
    return;
  }
  // Many tokens: blocks of tokens whose quantized inputs stay in the core's L2 cache while every panel of the
  // range passes over them (TOKEN_BLOCK_BYTES), each panel in tiles of four tokens.
  const block = tokenBlock(qRow, T);
  for (let t0 = 0; t0 < T; t0 += block) {
    const t1 = min(T, t0 + block);
    for (let p = p0; p < p1; p++) {
      const wp = w + <usize>p * panelBytes;
      const row = p << 3;
      const valid = n - row;
      const yr = y + (<usize>row << 2);
      let t = t0;
      for (; t + 4 <= t1; t += 4) {
        const q = scratch + <usize>t * qRow;
        const yt = yr + <usize>t * yStride;
        if (i16) mmI16Tile4(wp, g, q, qRow, tsAt + (<usize>t << 2), yt, yStride, act, accum, valid);
        else mmInt8Tile4(wp, g, q, qRow, tsAt + (<usize>t << 2), yt, yStride, act, accum, valid);
      }
      for (; t < t1; t++) {
        const q = scratch + <usize>t * qRow;
        const ts = load<f32>(tsAt + (<usize>t << 2));
        const yt = yr + <usize>t * yStride;
        if (i16) mmI16Tile1(wp, g, q, ts, yt, act, accum, valid);
        else mmInt8Tile1(wp, g, q, ts, yt, act, accum, valid);
      }
    }
  }
}

/**
 * The tokens' inputs of a product over integer panels (kind 2 int8, 3 i16), quantized into `scratch` as
 * matmulQuantized reads them: also the first half of the native products' call (engine/cpu/native/products.c).
 */
export function quantizeProductInputs(kind: i32, k: i32, x: usize, xs: i32, T: i32, scratch: usize): void {
  const i16 = kind == 3;
  const g = i16 ? (k + 3) >> 2 : (k + 1) >> 1;
  quantizeInputs(x, <usize>xs << 2, T, k, i16 ? g << 1 : g, scratch, i16 ? I16_INPUT_RANGE : inputRange(g));
}

// A prefill's quantized inputs are T rows of 2k (int8) or ~2k (i16) bytes: 512 tokens of the ffn value's 3072
// inputs are 3 MB, far past a core's L2 (512 KB on this Zen 3). Walking every panel over all of them streamed the
// inputs from L3 once per panel; a block of tokens within TOKEN_BLOCK_BYTES stays in L2 across the panels, and
// each panel (8k bytes int8, 16k i16) is read once per block instead (L1 / L2 across the block's tiles).
// Results do not change: every (token, row) sum is the same tile's, in the same input order. Measured (README):
// the products' CPU time at 2 threads 1.06-1.09x faster, unchanged at one (a core alone streams from L3 fast
// enough; two at once do not).
const TOKEN_BLOCK_BYTES: i32 = 131072;

/** Tokens per block for quantized rows of qRow bytes: a multiple of 4 (whole tiles), at least 4, at most T. */
@inline function tokenBlock(qRow: usize, T: i32): i32 {
  const b = max<i32>(4, (TOKEN_BLOCK_BYTES / <i32>qRow) & ~3);
  return min(b, T);
}

/** One token against one int8 panel. */
function mmInt8Tile1(wp: usize, kp: i32, q: usize, ts: f32, y: usize, act: i32, accum: i32, valid: i32): void {
  let a = i32x4.splat(0), b = i32x4.splat(0);
  const n = <usize>kp;
  for (let j: usize = 0; j < n; j++) {
    const s = v128.load32_splat(q + (j << 2));
    const wv = v128.load(wp + (j << 4));
    a = i32x4.add(a, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(wv), s));
    b = i32x4.add(b, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(wv), s));
  }
  storeInt8(y, a, b, ts, wp + (n << 4), act, accum, valid);
}

/** One token against two int8 panels: two weight streams and four independent sums. */
function mmInt8OneTwoPanels(wp: usize, panelBytes: usize, kp: i32, q: usize, ts: f32, y: usize, act: i32, accum: i32, valid: i32): void {
  let a0 = i32x4.splat(0), b0 = i32x4.splat(0);
  let a1 = i32x4.splat(0), b1 = i32x4.splat(0);
  const w1 = wp + panelBytes;
  const n = <usize>kp;
  for (let j: usize = 0; j < n; j++) {
    const s = v128.load32_splat(q + (j << 2));
    const u = v128.load(wp + (j << 4));
    const v = v128.load(w1 + (j << 4));
    a0 = i32x4.add(a0, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(u), s));
    b0 = i32x4.add(b0, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(u), s));
    a1 = i32x4.add(a1, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(v), s));
    b1 = i32x4.add(b1, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(v), s));
  }
  storeInt8(y, a0, b0, ts, wp + (n << 4), act, accum, valid);
  storeInt8(y + 32, a1, b1, ts, w1 + (n << 4), act, accum, valid - 8);
}

/** One token against four int8 panels: four weight streams and eight independent sums. */
function mmInt8OneFourPanels(wp: usize, panelBytes: usize, kp: i32, q: usize, ts: f32, y: usize, act: i32, accum: i32, valid: i32): void {
  let a0 = i32x4.splat(0), b0 = i32x4.splat(0);
  let a1 = i32x4.splat(0), b1 = i32x4.splat(0);
  let a2 = i32x4.splat(0), b2 = i32x4.splat(0);
  let a3 = i32x4.splat(0), b3 = i32x4.splat(0);
  const w1 = wp + panelBytes;
  const w2 = w1 + panelBytes;
  const w3 = w2 + panelBytes;
  const n = <usize>kp;
  for (let j: usize = 0; j < n; j++) {
    const s = v128.load32_splat(q + (j << 2));
    const o = j << 4;
    let u = v128.load(wp + o);
    a0 = i32x4.add(a0, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(u), s));
    b0 = i32x4.add(b0, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(u), s));
    u = v128.load(w1 + o);
    a1 = i32x4.add(a1, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(u), s));
    b1 = i32x4.add(b1, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(u), s));
    u = v128.load(w2 + o);
    a2 = i32x4.add(a2, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(u), s));
    b2 = i32x4.add(b2, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(u), s));
    u = v128.load(w3 + o);
    a3 = i32x4.add(a3, i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(u), s));
    b3 = i32x4.add(b3, i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(u), s));
  }
  storeInt8(y, a0, b0, ts, wp + (n << 4), act, accum, valid);
  storeInt8(y + 32, a1, b1, ts, w1 + (n << 4), act, accum, valid - 8);
  storeInt8(y + 64, a2, b2, ts, w2 + (n << 4), act, accum, valid - 16);
  storeInt8(y + 96, a3, b3, ts, w3 + (n << 4), act, accum, valid - 24);
}

/** Four tokens (quantized rows qRow bytes apart, scales at ts) against one int8 panel: each weight widened once. */
function mmInt8Tile4(wp: usize, kp: i32, q: usize, qRow: usize, ts: usize, y: usize, yStride: usize, act: i32, accum: i32, valid: i32): void {
  let a0 = i32x4.splat(0), b0 = i32x4.splat(0);
  let a1 = i32x4.splat(0), b1 = i32x4.splat(0);
  let a2 = i32x4.splat(0), b2 = i32x4.splat(0);
  let a3 = i32x4.splat(0), b3 = i32x4.splat(0);
  const q1 = q + qRow;
  const q2 = q1 + qRow;
  const q3 = q2 + qRow;
  const n = <usize>kp;
  for (let j: usize = 0; j < n; j++) {
    const wv = v128.load(wp + (j << 4));
    const lo = i16x8.extend_low_i8x16_s(wv);
    const hi = i16x8.extend_high_i8x16_s(wv);
    const o = j << 2;
    let s = v128.load32_splat(q + o);
    a0 = i32x4.add(a0, i32x4.dot_i16x8_s(lo, s)); b0 = i32x4.add(b0, i32x4.dot_i16x8_s(hi, s));
    s = v128.load32_splat(q1 + o);
    a1 = i32x4.add(a1, i32x4.dot_i16x8_s(lo, s)); b1 = i32x4.add(b1, i32x4.dot_i16x8_s(hi, s));
    s = v128.load32_splat(q2 + o);
    a2 = i32x4.add(a2, i32x4.dot_i16x8_s(lo, s)); b2 = i32x4.add(b2, i32x4.dot_i16x8_s(hi, s));
    s = v128.load32_splat(q3 + o);
    a3 = i32x4.add(a3, i32x4.dot_i16x8_s(lo, s)); b3 = i32x4.add(b3, i32x4.dot_i16x8_s(hi, s));
  }
  const sc = wp + (n << 4);
  storeInt8(y, a0, b0, load<f32>(ts), sc, act, accum, valid);
  storeInt8(y + yStride, a1, b1, load<f32>(ts, 4), sc, act, accum, valid);
  storeInt8(y + 2 * yStride, a2, b2, load<f32>(ts, 8), sc, act, accum, valid);
  storeInt8(y + 3 * yStride, a3, b3, load<f32>(ts, 12), sc, act, accum, valid);
}

// ---- i16 weights (kind 3: f16 matrices stored as 16-bit integers) -----------------------------------------------

// An f16 matrix is stored (engine/cpu/i16-quant.ts) as q[row][i] = round(w / scale[row]) within ±I16_WEIGHT_RANGE,
// one f32 scale per row: 16 bits a weight like f16, and a product needs no widening. Per 4 inputs (a quad:
// pairs 2j, 2j+1) a panel holds 64 bytes: pair 2j for rows 0..3 ([q[row][4j], q[row][4j+1]] each), pair 2j for
// rows 4..7, then pair 2j+1 the same; after the quads, the 8 row scales padded to 64 bytes (so every panel starts
// on a cache line, and no quad straddles two). Inputs are quantized per token to
// ±I16_INPUT_RANGE (quantizeInputs). One i32x4.dot_i16x8_s does 8 multiply-adds; the two dots of a quad sum in i32,
// which cannot overflow: 4 * 16383 * 32767 = 2,147,221,508 < 2^31 - 1. Each quad's sum is converted to f32 and
// added in input order, the same in every path, so results are the same bit for bit whatever T, the panel range
// or the thread count. Weights get the smaller range because the inputs' per-token scale is what costs accuracy:
// a row scale fits one row's weights, a token's scale all its inputs, outliers included.
// Per 8 multiply-adds: 2.5 instructions (one dot with its load, half an i32 add, convert and f32 add), against
// 8 for f16 (two widenings of three instructions and two multiply-adds).
const I16_INPUT_RANGE: f32 = 32767;

/** The i32 sum of one quad for 4 rows: the dots of pair 2j (weights at w) and pair 2j+1 (at w + 32). */
@inline function quadDot(w: usize, s0: v128, s1: v128): v128 {
  return i32x4.add(i32x4.dot_i16x8_s(v128.load(w), s0), i32x4.dot_i16x8_s(v128.load(w, 32), s1));
}

/** Stores 8 sums times the token's scale ts and the rows' scales (at sc). */
@inline function storeI16(y: usize, lo: v128, hi: v128, ts: f32, sc: usize, act: i32, accum: i32, valid: i32): void {
  const t = f32x4.splat(ts);
  store8(y, f32x4.mul(lo, t), f32x4.mul(hi, t), v128.load(sc), v128.load(sc, 16), act, accum, valid);
}

/** One token against one i16 panel. */
function mmI16Tile1(wp: usize, kq: i32, q: usize, ts: f32, y: usize, act: i32, accum: i32, valid: i32): void {
  let a = f32x4.splat(0), b = f32x4.splat(0);
  const n = <usize>kq;
  for (let j: usize = 0; j < n; j++) {
    const s0 = v128.load32_splat(q + (j << 3));
    const s1 = v128.load32_splat(q + (j << 3), 4);
    const o = wp + (j << 6);
    a = f32x4.add(a, f32x4.convert_i32x4_s(quadDot(o, s0, s1)));
    b = f32x4.add(b, f32x4.convert_i32x4_s(quadDot(o + 16, s0, s1)));
  }
  storeI16(y, a, b, ts, wp + (n << 6), act, accum, valid);
}

/** One token against four i16 panels: four weight streams and eight independent sums. */
function mmI16OneFourPanels(wp: usize, panelBytes: usize, kq: i32, q: usize, ts: f32, y: usize, act: i32, accum: i32, valid: i32): void {
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0);
  let a1 = f32x4.splat(0), b1 = f32x4.splat(0);
  let a2 = f32x4.splat(0), b2 = f32x4.splat(0);
  let a3 = f32x4.splat(0), b3 = f32x4.splat(0);
  const w1 = wp + panelBytes;
  const w2 = w1 + panelBytes;
  const w3 = w2 + panelBytes;
  const n = <usize>kq;
  for (let j: usize = 0; j < n; j++) {
    const s0 = v128.load32_splat(q + (j << 3));
    const s1 = v128.load32_splat(q + (j << 3), 4);
    const o = j << 6;
    a0 = f32x4.add(a0, f32x4.convert_i32x4_s(quadDot(wp + o, s0, s1)));
    b0 = f32x4.add(b0, f32x4.convert_i32x4_s(quadDot(wp + o + 16, s0, s1)));
    a1 = f32x4.add(a1, f32x4.convert_i32x4_s(quadDot(w1 + o, s0, s1)));
    b1 = f32x4.add(b1, f32x4.convert_i32x4_s(quadDot(w1 + o + 16, s0, s1)));
    a2 = f32x4.add(a2, f32x4.convert_i32x4_s(quadDot(w2 + o, s0, s1)));
    b2 = f32x4.add(b2, f32x4.convert_i32x4_s(quadDot(w2 + o + 16, s0, s1)));
    a3 = f32x4.add(a3, f32x4.convert_i32x4_s(quadDot(w3 + o, s0, s1)));
    b3 = f32x4.add(b3, f32x4.convert_i32x4_s(quadDot(w3 + o + 16, s0, s1)));
  }
  storeI16(y, a0, b0, ts, wp + (n << 6), act, accum, valid);
  storeI16(y + 32, a1, b1, ts, w1 + (n << 6), act, accum, valid - 8);
  storeI16(y + 64, a2, b2, ts, w2 + (n << 6), act, accum, valid - 16);
  storeI16(y + 96, a3, b3, ts, w3 + (n << 6), act, accum, valid - 24);
}

/**
 * Four tokens (quantized rows qRow bytes apart, scales at ts) against one i16 panel: each weight loaded once.
 * Rows 0..3 of a quad, then rows 4..7, so only two weight vectors are live beside the eight sums (x64 has 16
 * vector registers: holding all four spilled).
 */
function mmI16Tile4(wp: usize, kq: i32, q: usize, qRow: usize, ts: usize, y: usize, yStride: usize, act: i32, accum: i32, valid: i32): void {
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0);
  let a1 = f32x4.splat(0), b1 = f32x4.splat(0);
  let a2 = f32x4.splat(0), b2 = f32x4.splat(0);
  let a3 = f32x4.splat(0), b3 = f32x4.splat(0);
  const q1 = q + qRow;
  const q2 = q1 + qRow;
  const q3 = q2 + qRow;
  const n = <usize>kq;
  for (let j: usize = 0; j < n; j++) {
    const o = wp + (j << 6);
    const qo = j << 3;
    let w0 = v128.load(o);
    let w2 = v128.load(o, 32);
    a0 = f32x4.add(a0, f32x4.convert_i32x4_s(i32x4.add(i32x4.dot_i16x8_s(w0, v128.load32_splat(q + qo)), i32x4.dot_i16x8_s(w2, v128.load32_splat(q + qo, 4)))));
    a1 = f32x4.add(a1, f32x4.convert_i32x4_s(i32x4.add(i32x4.dot_i16x8_s(w0, v128.load32_splat(q1 + qo)), i32x4.dot_i16x8_s(w2, v128.load32_splat(q1 + qo, 4)))));
    a2 = f32x4.add(a2, f32x4.convert_i32x4_s(i32x4.add(i32x4.dot_i16x8_s(w0, v128.load32_splat(q2 + qo)), i32x4.dot_i16x8_s(w2, v128.load32_splat(q2 + qo, 4)))));
    a3 = f32x4.add(a3, f32x4.convert_i32x4_s(i32x4.add(i32x4.dot_i16x8_s(w0, v128.load32_splat(q3 + qo)), i32x4.dot_i16x8_s(w2, v128.load32_splat(q3 + qo, 4)))));
    w0 = v128.load(o, 16);
    w2 = v128.load(o, 48);
    b0 = f32x4.add(b0, f32x4.convert_i32x4_s(i32x4.add(i32x4.dot_i16x8_s(w0, v128.load32_splat(q + qo)), i32x4.dot_i16x8_s(w2, v128.load32_splat(q + qo, 4)))));
    b1 = f32x4.add(b1, f32x4.convert_i32x4_s(i32x4.add(i32x4.dot_i16x8_s(w0, v128.load32_splat(q1 + qo)), i32x4.dot_i16x8_s(w2, v128.load32_splat(q1 + qo, 4)))));
    b2 = f32x4.add(b2, f32x4.convert_i32x4_s(i32x4.add(i32x4.dot_i16x8_s(w0, v128.load32_splat(q2 + qo)), i32x4.dot_i16x8_s(w2, v128.load32_splat(q2 + qo, 4)))));
    b3 = f32x4.add(b3, f32x4.convert_i32x4_s(i32x4.add(i32x4.dot_i16x8_s(w0, v128.load32_splat(q3 + qo)), i32x4.dot_i16x8_s(w2, v128.load32_splat(q3 + qo, 4)))));
  }
  const sc = wp + (n << 6);
  storeI16(y, a0, b0, load<f32>(ts), sc, act, accum, valid);
  storeI16(y + yStride, a1, b1, load<f32>(ts, 4), sc, act, accum, valid);
  storeI16(y + 2 * yStride, a2, b2, load<f32>(ts, 8), sc, act, accum, valid);
  storeI16(y + 3 * yStride, a3, b3, load<f32>(ts, 12), sc, act, accum, valid);
}

// ---- per-token vector work --------------------------------------------------------------------------------

/** Mean and 1/sqrt(var + eps) of n floats at x, left in statMean and statInv (per instance: per thread). */
let statMean: f32 = 0;
let statInv: f32 = 0;

function stats(x: usize, n: i32, eps: f32): void {
  let s = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) s = f32x4.add(s, v128.load(x + (<usize>i << 2)));
  let sum: f32 = f32x4.extract_lane(s, 0) + f32x4.extract_lane(s, 1) + f32x4.extract_lane(s, 2) + f32x4.extract_lane(s, 3);
  for (; i < n; i++) sum += load<f32>(x + (<usize>i << 2));
  const mean = sum / <f32>n;
  const m = f32x4.splat(mean);
  let q = f32x4.splat(0);
  i = 0;
  for (; i + 4 <= n; i += 4) {
    const d = f32x4.sub(v128.load(x + (<usize>i << 2)), m);
    q = madd(d, d, q);
  }
  let sq: f32 = f32x4.extract_lane(q, 0) + f32x4.extract_lane(q, 1) + f32x4.extract_lane(q, 2) + f32x4.extract_lane(q, 3);
  for (; i < n; i++) {
    const d = load<f32>(x + (<usize>i << 2)) - mean;
    sq += d * d;
  }
  statMean = mean;
  statInv = 1 / Mathf.sqrt(sq / <f32>n + eps);
}

/** out[r] = layer_norm(x[rows[r]]) * w + b over C floats, for R rows (rows: i32 indices). */
export function layerNormRows(x: usize, rows: usize, R: i32, C: i32, w: usize, b: usize, out: usize): void {
  for (let r = 0; r < R; r++) {
    const src = x + <usize>load<i32>(rows + (<usize>r << 2)) * <usize>C * 4;
    normRow(src, C, w, b, out + <usize>r * <usize>C * 4);
  }
}

function normRow(src: usize, C: i32, w: usize, b: usize, dst: usize): void {
  stats(src, C, 1e-5);
  const m = f32x4.splat(statMean);
  const inv = f32x4.splat(statInv);
  for (let c = 0; c < C; c += 4) {
    const o = <usize>c << 2;
    const v = f32x4.mul(f32x4.sub(v128.load(src + o), m), inv);
    v128.store(dst + o, f32x4.add(f32x4.mul(v, v128.load(w + o)), v128.load(b + o)));
  }
}

/**
 * Layer norm fused with the token shift: xn[t] = LN(x[t]); prev = the slot's saved shift state for a slot's
 * first token of the call (first[t] != 0: its address in `prevAddr[t]`), else xn[t-1];
 * out_m[t] = xn + (prev - xn) * mix[m] for the M mix vectors, copy m at m*region floats.
 */
export function lnShift(
  x: usize, T: i32, C: i32, ln: usize, xn: usize, prevAddr: usize, mix: usize, M: i32, out: usize, region: i32,
): void {
  lnShiftTokens(x, 0, T, C, ln, xn, prevAddr, mix, M, out, region, 0);
}

/**
 * lnShift for tokens t0..t1 of the call, so threads can split a prefill's tokens: when t0's previous token is
 * the call's own (t0 > 0 and no slot state), its normalized row is computed again into `before` (C floats of
 * the thread's scratch), the same bits as the thread that owns it writes to xn, which may not be there yet.
 */
export function lnShiftTokens(
  x: usize, t0: i32, t1: i32, C: i32, ln: usize, xn: usize, prevAddr: usize, mix: usize, M: i32, out: usize, region: i32,
  before: usize,
): void {
  const rowBytes = <usize>C << 2;
  const regBytes = <usize>region << 2;
  for (let t = t0; t < t1; t++) {
    const xt = xn + <usize>t * rowBytes;
    normRow(x + <usize>t * rowBytes, C, ln, ln + rowBytes, xt);
    const pa = load<u32>(prevAddr + (<usize>t << 2));
    let prev: usize = pa != 0 ? <usize>pa : xt - rowBytes;
    if (pa == 0 && t == t0 && t0 > 0) {
      normRow(x + <usize>(t - 1) * rowBytes, C, ln, ln + rowBytes, before);
      prev = before;
    }
    for (let m = 0; m < M; m++) {
      const mw = mix + <usize>m * rowBytes;
      const dst = out + <usize>m * regBytes + <usize>t * rowBytes;
      for (let c = 0; c < C; c += 4) {
        const o = <usize>c << 2;
        const v = v128.load(xt + o);
        v128.store(dst + o, madd(f32x4.sub(v128.load(prev + o), v), v128.load(mw + o), v));
      }
    }
  }
}

/** The embedding rows of T token ids (i32 at ids) into out [T, C]; the table is f16 (or f32 when wide). */
export function embed(table: usize, wide: i32, ids: usize, T: i32, C: i32, out: usize): void {
  for (let t = 0; t < T; t++) {
    const id = <usize>load<i32>(ids + (<usize>t << 2));
    const dst = out + <usize>t * <usize>C * 4;
    if (wide) {
      memory.copy(dst, table + id * <usize>C * 4, <usize>C * 4);
      continue;
    }
    const src = table + id * <usize>C * 2;
    const sc = f32x4.splat(F16_SCALE);
    for (let c = 0; c < C; c += 8) {
      v128.store(dst + (<usize>c << 2), f32x4.mul(halfLo(src + (<usize>c << 1)), sc));
      v128.store(dst + (<usize>c << 2), f32x4.mul(halfHi(src + (<usize>c << 1)), sc), 16);
    }
  }
}

/**
 * RWKV-7 per-token quantities before the state update (one token t, all heads), in the time-mix regions
 * (floats, each `region` apart): 0 r, 1 w, 2 k, 3 v, 4 a, 5 g, 6 kk, 7 y, 8 v LoRA. p = [w0, a0, v0, k_k, k_a].
 * Afterwards w is the decay, a holds kk*a, k the adjusted key, kk the normalized removal key, and v is mixed
 * with layer 0's value (first: stored into vfirst instead).
 */
export function prep(tm: usize, region: i32, T: i32, C: i32, N: i32, p: usize, vfirst: usize, first: i32): void {
  const reg = <usize>region << 2;
  const cb = <usize>C << 2;
  const one = f32x4.splat(1);
  const decayScale = f32x4.splat(-0.606531);
  for (let t = 0; t < T; t++) {
    const base = tm + <usize>t * cb;
    const vf = vfirst + <usize>t * cb;
    for (let h = 0; h < C / N; h++) {
      const h0 = <usize>(h * N) << 2;
      // The removal key's length over the head, in four partial sums.
      let ssv = f32x4.splat(0);
      for (let i = 0; i < N; i += 4) {
        const o = h0 + (<usize>i << 2);
        const kkv = f32x4.mul(v128.load(base + 2 * reg + o), v128.load(p + 3 * cb + o));
        ssv = madd(kkv, kkv, ssv);
      }
      const ss: f32 = f32x4.extract_lane(ssv, 0) + f32x4.extract_lane(ssv, 1) + f32x4.extract_lane(ssv, 2) + f32x4.extract_lane(ssv, 3);
      const inv = f32x4.splat(1 / max(Mathf.sqrt(ss), 1e-12));
      for (let i = 0; i < N; i += 4) {
        const o = h0 + (<usize>i << 2);
        const kv = v128.load(base + 2 * reg + o);
        const av = vsigmoid(f32x4.add(v128.load(p + cb + o), v128.load(base + 4 * reg + o)));
        const kkn = f32x4.mul(f32x4.mul(kv, v128.load(p + 3 * cb + o)), inv);
        v128.store(base + 6 * reg + o, kkn);
        v128.store(base + 4 * reg + o, f32x4.mul(kkn, av));
        v128.store(base + 2 * reg + o, f32x4.mul(kv, madd(f32x4.sub(av, one), v128.load(p + 4 * cb + o), one)));
        v128.store(base + reg + o, vexp(f32x4.mul(decayScale, vsigmoid(f32x4.add(v128.load(p + o), v128.load(base + reg + o))))));
        const vv = v128.load(base + 3 * reg + o);
        if (first) {
          v128.store(vf + o, vv);
        } else {
          const mixv = vsigmoid(f32x4.add(v128.load(p + 2 * cb + o), v128.load(base + 8 * reg + o)));
          v128.store(base + 3 * reg + o, madd(f32x4.sub(v128.load(vf + o), vv), mixv, vv));
        }
      }
    }
  }
}

/**
 * The WKV-7 state update of one head over tokens t0..t0+n of one slot: s = s diag(w) - (s kk)(kk a)^T + v k^T,
 * y = s r. s is the head's N x N state [value][key] at `s`; the inputs are in the time-mix regions.
 */
export function wkv(tm: usize, region: i32, C: i32, N: i32, head: i32, t0: i32, n: i32, s: usize): void {
  const reg = <usize>region << 2;
  const rowBytes = <usize>N << 2;
  for (let t = t0; t < t0 + n; t++) {
    const at = (<usize>t * <usize>C + <usize>head * <usize>N) << 2;
    const r = tm + at;
    const w = tm + reg + at;
    const k = tm + 2 * reg + at;
    const v = tm + 3 * reg + at;
    const b = tm + 4 * reg + at;
    const kk = tm + 6 * reg + at;
    const y = tm + 7 * reg + at;
    // Two state rows at a time: two independent sums in flight hide the add latency, and w, b, k, r are loaded
    // once for both. Each row's sums keep their order, so the results are the one-row loop's bit for bit.
    for (let i = 0; i < N; i += 2) {
      const row = s + <usize>i * rowBytes;
      const row1 = row + rowBytes;
      let sa = f32x4.splat(0);
      let sa1 = f32x4.splat(0);
      for (let j = 0; j < N; j += 4) {
        const o = <usize>j << 2;
        const kv = v128.load(kk + o);
        sa = madd(v128.load(row + o), kv, sa);
        sa1 = madd(v128.load(row1 + o), kv, sa1);
      }
      // Negated, so the update is one product and two multiply-adds per vector.
      const saS = f32x4.splat(-(f32x4.extract_lane(sa, 0) + f32x4.extract_lane(sa, 1) + f32x4.extract_lane(sa, 2) + f32x4.extract_lane(sa, 3)));
      const saS1 = f32x4.splat(-(f32x4.extract_lane(sa1, 0) + f32x4.extract_lane(sa1, 1) + f32x4.extract_lane(sa1, 2) + f32x4.extract_lane(sa1, 3)));
      const vi = v128.load32_splat(v + (<usize>i << 2));
      const vi1 = v128.load32_splat(v + (<usize>i << 2), 4);
      let out = f32x4.splat(0);
      let out1 = f32x4.splat(0);
      for (let j = 0; j < N; j += 4) {
        const o = <usize>j << 2;
        const wv = v128.load(w + o);
        const bv = v128.load(b + o);
        const kv = v128.load(k + o);
        const rv = v128.load(r + o);
        const nv = madd(v128.load(row + o), wv, madd(vi, kv, f32x4.mul(saS, bv)));
        const nv1 = madd(v128.load(row1 + o), wv, madd(vi1, kv, f32x4.mul(saS1, bv)));
        v128.store(row + o, nv);
        v128.store(row1 + o, nv1);
        out = madd(nv, rv, out);
        out1 = madd(nv1, rv, out1);
      }
      store<f32>(y + (<usize>i << 2), f32x4.extract_lane(out, 0) + f32x4.extract_lane(out, 1) + f32x4.extract_lane(out, 2) + f32x4.extract_lane(out, 3));
      store<f32>(y + (<usize>i << 2), f32x4.extract_lane(out1, 0) + f32x4.extract_lane(out1, 1) + f32x4.extract_lane(out1, 2) + f32x4.extract_lane(out1, 3), 4);
    }
  }
}

/** After WKV, per token and head: group norm (eps 64e-5), the r*k*r_k bonus, the gate. p = [r_k, ln_x.w, ln_x.b]. */
export function post(tm: usize, region: i32, T: i32, C: i32, N: i32, p: usize, out: usize): void {
  const reg = <usize>region << 2;
  const cb = <usize>C << 2;
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < C / N; h++) {
      const at = (<usize>t * <usize>C + <usize>h * <usize>N) << 2;
      const po = <usize>(h * N) << 2;
      stats(tm + 7 * reg + at, N, 64e-5);
      let bv = f32x4.splat(0);
      for (let i = 0; i < N; i += 4) {
        const o = <usize>i << 2;
        bv = madd(f32x4.mul(v128.load(tm + at + o), v128.load(tm + 2 * reg + at + o)), v128.load(p + po + o), bv);
      }
      const bonus = f32x4.splat(f32x4.extract_lane(bv, 0) + f32x4.extract_lane(bv, 1) + f32x4.extract_lane(bv, 2) + f32x4.extract_lane(bv, 3));
      const mean = f32x4.splat(statMean);
      const inv = f32x4.splat(statInv);
      for (let i = 0; i < N; i += 4) {
        const o = <usize>i << 2;
        const d = f32x4.mul(f32x4.sub(v128.load(tm + 7 * reg + at + o), mean), inv);
        const v = madd(bonus, v128.load(tm + 3 * reg + at + o), madd(d, v128.load(p + cb + po + o), v128.load(p + 2 * cb + po + o)));
        v128.store(out + at + o, f32x4.mul(v, v128.load(tm + 5 * reg + at + o)));
      }
    }
  }
}

/**
 * RWKV-7a's DeepEmbed gate on the channel mix's hidden layer (shaders/rwkv7a_gate.wgsl has the math), for T
 * tokens: h[t] *= (u · SE) · s2 + s0, with u = xn[t] · s1 [32] and SE = table[ids[t]] + se[t] [1024] viewed 32×32.
 * p = [s1 [C, 32], s2 [32, F], s0 [F]] f32; the table is f16 (f32 when wide); F a multiple of 4; scratch 64 floats.
 */
export function deepEmbedGate(
  T: i32, C: i32, F: i32, ids: usize, table: usize, wide: i32, se: usize, xn: usize, p: usize, h: usize, scratch: usize,
): void {
  const u = scratch;
  const ss = scratch + 128;
  const s2 = p + ((<usize>C * 32) << 2);
  const s0 = s2 + ((<usize>F * 32) << 2);
  const sc = f32x4.splat(F16_SCALE);
  for (let t = 0; t < T; t++) {
    // u = xn[t] · s1: s1's rows are 32 floats, 8 vectors.
    const x = xn + ((<usize>t * <usize>C) << 2);
    let u0 = f32x4.splat(0), u1 = f32x4.splat(0), u2 = f32x4.splat(0), u3 = f32x4.splat(0);
    let u4 = f32x4.splat(0), u5 = f32x4.splat(0), u6 = f32x4.splat(0), u7 = f32x4.splat(0);
    for (let c = 0; c < C; c++) {
      const xc = v128.load32_splat(x + (<usize>c << 2));
      const row = p + (<usize>c << 7);
      u0 = madd(xc, v128.load(row), u0);
      u1 = madd(xc, v128.load(row, 16), u1);
      u2 = madd(xc, v128.load(row, 32), u2);
      u3 = madd(xc, v128.load(row, 48), u3);
      u4 = madd(xc, v128.load(row, 64), u4);
      u5 = madd(xc, v128.load(row, 80), u5);
      u6 = madd(xc, v128.load(row, 96), u6);
      u7 = madd(xc, v128.load(row, 112), u7);
    }
    v128.store(u, u0);
    v128.store(u, u1, 16);
    v128.store(u, u2, 32);
    v128.store(u, u3, 48);
    v128.store(u, u4, 64);
    v128.store(u, u5, 80);
    v128.store(u, u6, 96);
    v128.store(u, u7, 112);
    // ss = u · SE (32×32): row m of SE scaled by u[m], summed over m.
    const id = <usize>load<i32>(ids + (<usize>t << 2));
    const seRow = se + ((<usize>t * 1024) << 2);
    let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
    let a4 = f32x4.splat(0), a5 = f32x4.splat(0), a6 = f32x4.splat(0), a7 = f32x4.splat(0);
    for (let m = 0; m < 32; m++) {
      const um = v128.load32_splat(u + (<usize>m << 2));
      const e = seRow + (<usize>m << 7);
      let w0: v128, w1: v128, w2: v128, w3: v128, w4: v128, w5: v128, w6: v128, w7: v128;
      if (wide) {
        const r = table + ((id * 1024 + (<usize>m << 5)) << 2);
        w0 = v128.load(r); w1 = v128.load(r, 16); w2 = v128.load(r, 32); w3 = v128.load(r, 48);
        w4 = v128.load(r, 64); w5 = v128.load(r, 80); w6 = v128.load(r, 96); w7 = v128.load(r, 112);
      } else {
        const r = table + ((id * 1024 + (<usize>m << 5)) << 1);
        w0 = f32x4.mul(halfLo(r), sc); w1 = f32x4.mul(halfHi(r), sc);
        w2 = f32x4.mul(halfLo(r + 16), sc); w3 = f32x4.mul(halfHi(r + 16), sc);
        w4 = f32x4.mul(halfLo(r + 32), sc); w5 = f32x4.mul(halfHi(r + 32), sc);
        w6 = f32x4.mul(halfLo(r + 48), sc); w7 = f32x4.mul(halfHi(r + 48), sc);
      }
      a0 = madd(um, f32x4.add(w0, v128.load(e)), a0);
      a1 = madd(um, f32x4.add(w1, v128.load(e, 16)), a1);
      a2 = madd(um, f32x4.add(w2, v128.load(e, 32)), a2);
      a3 = madd(um, f32x4.add(w3, v128.load(e, 48)), a3);
      a4 = madd(um, f32x4.add(w4, v128.load(e, 64)), a4);
      a5 = madd(um, f32x4.add(w5, v128.load(e, 80)), a5);
      a6 = madd(um, f32x4.add(w6, v128.load(e, 96)), a6);
      a7 = madd(um, f32x4.add(w7, v128.load(e, 112)), a7);
    }
    v128.store(ss, a0);
    v128.store(ss, a1, 16);
    v128.store(ss, a2, 32);
    v128.store(ss, a3, 48);
    v128.store(ss, a4, 64);
    v128.store(ss, a5, 80);
    v128.store(ss, a6, 96);
    v128.store(ss, a7, 112);
    // h[t] *= s0 + ss · s2: sixteen hidden units at a time (one cache line of each s2 row per j), then by four.
    const hRow = h + ((<usize>t * <usize>F) << 2);
    const rowB = <usize>F << 2;
    let f = 0;
    for (; f + 16 <= F; f += 16) {
      const fo = <usize>f << 2;
      let g0 = v128.load(s0 + fo), g1 = v128.load(s0 + fo, 16), g2 = v128.load(s0 + fo, 32), g3 = v128.load(s0 + fo, 48);
      let r = s2 + fo;
      for (let j = 0; j < 32; j++) {
        const sj = v128.load32_splat(ss + (<usize>j << 2));
        g0 = madd(sj, v128.load(r), g0);
        g1 = madd(sj, v128.load(r, 16), g1);
        g2 = madd(sj, v128.load(r, 32), g2);
        g3 = madd(sj, v128.load(r, 48), g3);
        r += rowB;
      }
      v128.store(hRow + fo, f32x4.mul(v128.load(hRow + fo), g0));
      v128.store(hRow + fo, f32x4.mul(v128.load(hRow + fo, 16), g1), 16);
      v128.store(hRow + fo, f32x4.mul(v128.load(hRow + fo, 32), g2), 32);
      v128.store(hRow + fo, f32x4.mul(v128.load(hRow + fo, 48), g3), 48);
    }
    for (; f < F; f += 4) {
      const fo = <usize>f << 2;
      let g = v128.load(s0 + fo);
      for (let j = 0; j < 32; j++) {
        g = madd(v128.load32_splat(ss + (<usize>j << 2)), v128.load(s2 + ((<usize>j * <usize>F) << 2) + fo), g);
      }
      v128.store(hRow + fo, f32x4.mul(v128.load(hRow + fo), g));
    }
  }
}

// ---- RWKV-4, RWKV-5.2 and RWKV-6 --------------------------------------------------------------------------------
// Their layer has the matrices and layer norms above; these are its per-token pieces (engine/rwkv6/cpu-forward.ts,
// engine/rwkv4/cpu-forward.ts lay out the regions). Every sum keeps one order per token and head (or channel), so
// results do not depend on the batch, its chunks or the thread count.

/** x[i] += r[i] * v[i] for n floats (n a multiple of 4): the end of the RWKV-4/5/6 channel mix. */
export function gatedAdd(x: usize, r: usize, v: usize, n: i32): void {
  for (let i = 0; i < n; i += 4) {
    const o = <usize>i << 2;
    v128.store(x + o, madd(v128.load(r + o), v128.load(v + o), v128.load(x + o)));
  }
}

// RWKV-5/6 time-mix regions of `tm` (each `region` floats apart): 0 r, 1 k, 2 v, 3 g, 4 the decay LoRA's output
// (RWKV-6), 5 the WKV output y, 6..10 the token-shift LoRA outputs (w, k, v, r, g), 11 xxx, 12 the previous
// token, 13..17 the mixed inputs w, k, v, r, g (RWKV-6; RWKV-5's four inputs r, k, v, g sit at 11..14).

/**
 * RWKV-6's data-dependent token shift for T tokens: input_m = xn + (prev - xn) * (maa_m + lora_m) for the five
 * inputs m = w, k, v, r, g (regions 13..17), prev in region 12; p = time_maa_{w,k,v,r,g} [5, C]. (N and the last
 * argument are unused: the thread pool's per-token tasks share one argument list.)
 */
export function finchMix(tm: usize, region: i32, T: i32, C: i32, N: i32, p: usize, xn: usize, unused: i32): void {
  const reg = <usize>region << 2;
  const cb = <usize>C << 2;
  for (let t = 0; t < T; t++) {
    const base = <usize>t * cb;
    for (let c = 0; c < C; c += 4) {
      const o = base + (<usize>c << 2);
      const xv = v128.load(xn + o);
      const d = f32x4.sub(v128.load(tm + 12 * reg + o), xv);
      for (let m: usize = 0; m < 5; m++) {
        const mv = f32x4.add(v128.load(p + m * cb + (<usize>c << 2)), v128.load(tm + (6 + m) * reg + o));
        v128.store(tm + (13 + m) * reg + o, madd(d, mv, xv));
      }
    }
  }
}

/**
 * The RWKV-5/6 WKV state update of one head over tokens t0..t0+n of one slot: y_i = sum_j r_j (u_j k_j v_i + S_ij),
 * then S_ij = S_ij w_j + k_j v_i. S is the head's N x N state [value i][key j] at `s`; p = [decay, u] (C each):
 * the decay is w itself for RWKV-5 (dynamic 0, exp(-exp(time_decay)) taken at load), time_decay for RWKV-6
 * (dynamic 1: w = exp(-exp(time_decay + region 4)), written over region 4 of the head's channels).
 */
export function finchWkv(tm: usize, region: i32, C: i32, N: i32, head: i32, t0: i32, n: i32, s: usize, p: usize, dynamic: i32): void {
  const reg = <usize>region << 2;
  const rowBytes = <usize>N << 2;
  const h0 = (<usize>head * <usize>N) << 2;
  const u = p + (<usize>C << 2) + h0;
  for (let t = t0; t < t0 + n; t++) {
    const at = (<usize>t * <usize>C << 2) + h0;
    const r = tm + at;
    const k = tm + reg + at;
    const v = tm + 2 * reg + at;
    const y = tm + 5 * reg + at;
    let w = p + h0;
    if (dynamic) {
      w = tm + 4 * reg + at;
      for (let j = 0; j < N; j += 4) {
        const o = <usize>j << 2;
        v128.store(w + o, vexp(f32x4.neg(vexp(f32x4.add(v128.load(p + h0 + o), v128.load(w + o))))));
      }
    }
    // The bonus sum_j r_j u_j k_j, shared by every row (times v_i).
    let bv = f32x4.splat(0);
    for (let j = 0; j < N; j += 4) {
      const o = <usize>j << 2;
      bv = madd(f32x4.mul(v128.load(r + o), v128.load(u + o)), v128.load(k + o), bv);
    }
    const bonus: f32 = f32x4.extract_lane(bv, 0) + f32x4.extract_lane(bv, 1) + f32x4.extract_lane(bv, 2) + f32x4.extract_lane(bv, 3);
    // Two rows at a time, as the RWKV-7 update: r, k, w loaded once for both.
    for (let i = 0; i < N; i += 2) {
      const row = s + <usize>i * rowBytes;
      const row1 = row + rowBytes;
      const vi: f32 = load<f32>(v + (<usize>i << 2));
      const vi1: f32 = load<f32>(v + (<usize>i << 2), 4);
      const viv = f32x4.splat(vi);
      const viv1 = f32x4.splat(vi1);
      let acc = f32x4.splat(0);
      let acc1 = f32x4.splat(0);
      for (let j = 0; j < N; j += 4) {
        const o = <usize>j << 2;
        const sv = v128.load(row + o);
        const sv1 = v128.load(row1 + o);
        const rv = v128.load(r + o);
        const kv = v128.load(k + o);
        const wv = v128.load(w + o);
        acc = madd(sv, rv, acc);
        acc1 = madd(sv1, rv, acc1);
        v128.store(row + o, madd(sv, wv, f32x4.mul(kv, viv)));
        v128.store(row1 + o, madd(sv1, wv, f32x4.mul(kv, viv1)));
      }
      store<f32>(y + (<usize>i << 2), f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 2) + f32x4.extract_lane(acc, 3) + vi * bonus);
      store<f32>(y + (<usize>i << 2), f32x4.extract_lane(acc1, 0) + f32x4.extract_lane(acc1, 1) + f32x4.extract_lane(acc1, 2) + f32x4.extract_lane(acc1, 3) + vi1 * bonus, 4);
    }
  }
}

/** After the RWKV-5/6 WKV, per token and head: group norm of y (eps 64e-5), times silu(g). p = [ln_x.w, ln_x.b]. */
export function finchPost(tm: usize, region: i32, T: i32, C: i32, N: i32, p: usize, out: usize, unused: i32): void {
  const reg = <usize>region << 2;
  const cb = <usize>C << 2;
  const one = f32x4.splat(1);
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < C / N; h++) {
      const po = <usize>(h * N) << 2;
      const at = <usize>t * cb + po;
      stats(tm + 5 * reg + at, N, 64e-5);
      const mean = f32x4.splat(statMean);
      const inv = f32x4.splat(statInv);
      for (let i = 0; i < N; i += 4) {
        const o = <usize>i << 2;
        const d = f32x4.mul(f32x4.sub(v128.load(tm + 5 * reg + at + o), mean), inv);
        const g = v128.load(tm + 3 * reg + at + o);
        const silu = f32x4.div(g, f32x4.add(one, vexp(f32x4.neg(g))));
        v128.store(out + at + o, f32x4.mul(madd(d, v128.load(p + po + o), v128.load(p + cb + po + o)), silu));
      }
    }
  }
}

/**
 * The RWKV-4 time-mix recurrence (engine/rwkv4/weights.ts has the math) for channels c0..c0+cn (cn a multiple of
 * 4) over tokens t0..t0+n of one slot, in the stable form: every exp takes a difference <= 0. Regions: 0 k,
 * 1 v, 2 sigmoid(r); out[t] = r * wkv. The slot's layer state at s: a [C], b [C], p [C]; decay = [w, u] (C each).
 * A state with b = 0 holds nothing, whatever its p: p is read as the reference's start -1e30 (so the zero state
 * is the fresh one and evolves exactly into the reference's state).
 */
export function rwkv4Wkv(tm: usize, region: i32, C: i32, c0: i32, cn: i32, t0: i32, n: i32, s: usize, decay: usize, out: usize): void {
  const reg = <usize>region << 2;
  const cb = <usize>C << 2;
  const empty = f32x4.splat(-1e30);
  for (let c = c0; c < c0 + cn; c += 4) {
    const co = <usize>c << 2;
    let a = v128.load(s + co);
    let b = v128.load(s + cb + co);
    let p = v128.bitselect(empty, v128.load(s + 2 * cb + co), f32x4.eq(b, f32x4.splat(0)));
    const w = v128.load(decay + co);
    const u = v128.load(decay + cb + co);
    for (let t = t0; t < t0 + n; t++) {
      const o = <usize>t * cb + co;
      const k = v128.load(tm + o);
      const v = v128.load(tm + reg + o);
      const r = v128.load(tm + 2 * reg + o);
      const uk = f32x4.add(u, k);
      const q = f32x4.max(p, uk);
      const e1 = vexp(f32x4.sub(p, q));
      const e2 = vexp(f32x4.sub(uk, q));
      const num = f32x4.add(f32x4.mul(e1, a), f32x4.mul(e2, v));
      const den = f32x4.add(f32x4.mul(e1, b), e2);
      v128.store(out + o, f32x4.mul(r, f32x4.div(num, den)));
      const pw = f32x4.add(p, w);
      const p2 = f32x4.max(pw, k);
      const d1 = vexp(f32x4.sub(pw, p2));
      const d2 = vexp(f32x4.sub(k, p2));
      a = f32x4.add(f32x4.mul(d1, a), f32x4.mul(d2, v));
      b = f32x4.add(f32x4.mul(d1, b), d2);
      p = p2;
    }
    v128.store(s + co, a);
    v128.store(s + cb + co, b);
    v128.store(s + 2 * cb + co, p);
  }
}
