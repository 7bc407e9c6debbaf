// f16 matrices stored as i16 codes with row scales on the CPU backend (engine/cpu/i16-quant.ts, kernels.ts
// `matmulI16`): the kernels' product against a float64 reference of the same codes (every code path: one token
// over four panels, one and a partial one, many tokens four at a time and singly), the same bits whatever the
// path, the i32 overflow edge, the writer's choice of kind (RWKV_CPU_F16_AS), and the backend's logits against
// the exact f16 products.

import { strict as assert } from 'assert';
import { i16Panels, I16_WEIGHT_RANGE, quantizeRowsI16, type I16Rows } from '../engine/cpu/i16-quant';
import { instantiateKernels } from '../engine/cpu/wasm-kernels';
import { f16StorageFromEnv, MATRIX_KIND } from '../engine/cpu/cpu-weight-writer';
import { planRwkv7Cpu } from '../engine/rwkv7/cpu-weights';
import { Arena } from '../engine/cpu/arena';
import { createBackend } from '../engine/backend';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { describeModel } from '../engine/model-spec';
import { f32ToF16 } from '../engine/loader/dtype';

function seeded(seed: number) {
  let s = seed >>> 0 || 1;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

const I16_INPUT_RANGE = 32767;

/** Round half to even, as f32x4.nearest. */
function nearestEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** A token's inputs as the kernel quantises them: codes and the token's scale, in f32 arithmetic. */
function quantisedInputs(x: Float32Array): { q: Int32Array; scale: number } {
  let m = 0;
  for (const v of x) m = Math.max(m, Math.abs(v));
  const inv = m > 0 ? Math.fround(I16_INPUT_RANGE / m) : 0;
  const q = Int32Array.from(x, (v) => Math.max(-I16_INPUT_RANGE, Math.min(I16_INPUT_RANGE, nearestEven(Math.fround(v * inv)))));
  return { q, scale: m > 0 ? Math.fround(m / I16_INPUT_RANGE) : 0 };
}

/** Runs kind 3 over `tokens` rows of x (k floats each) with panels p0..p1; returns y [tokens, n]. */
function runI16(packed: Uint8Array, n: number, k: number, x: Float32Array, tokens: number, p0: number, p1: number): Float32Array {
  const pages = Math.ceil((packed.length + 2 * tokens * k * 4 + tokens * n * 4 + 4 * tokens * (k + 8) + 65536 * 4) / 65536);
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  const kern = instantiateKernels(memory);
  const align = (v: number) => Math.ceil(v / 64) * 64;
  const W = 65536;
  const X = align(W + packed.length);
  const Y = align(X + tokens * k * 4);
  const ys = n + 5; // the rows between are left alone
  const S = align(Y + tokens * ys * 4);
  new Uint8Array(memory.buffer).set(packed, W);
  new Float32Array(memory.buffer).set(x.subarray(0, tokens * k), X / 4);
  new Float32Array(memory.buffer).fill(NaN, Y / 4, Y / 4 + tokens * ys);
  kern.matmul(W, n, k, MATRIX_KIND.i16, X, k, Y, ys, tokens, 0, 0, p0, p1, S);
  const f = new Float32Array(memory.buffer);
  const out = new Float32Array(tokens * n);
  for (let t = 0; t < tokens; t++) {
    out.set(f.subarray(Y / 4 + t * ys, Y / 4 + t * ys + n), t * n);
    for (let r = n; r < ys; r++) assert.ok(Number.isNaN(f[Y / 4 + t * ys + r]), `token ${t}: row ${r} past the matrix written`);
  }
  return out;
}

describe('CPU i16 weights: kernels', () => {
  // 43 rows: five whole panels and one of three rows; k not a multiple of 4.
  const n = 43;
  const k = 37;
  const T = 6;
  const rnd = seeded(7);
  // Rows of different magnitudes, so a scale read from the wrong row shows.
  const w = Float32Array.from({ length: n * k }, (_, i) => (rnd() - 0.5) * (1 + (Math.floor(i / k) % 5)));
  const x = Float32Array.from({ length: T * k }, () => (rnd() - 0.5) * 4);
  const panels = Math.ceil(n / 8);
  let rows: I16Rows;
  let packed: Uint8Array;
  before(async () => {
    rows = await quantizeRowsI16(f32ToF16(w), n, k);
    packed = i16Panels(rows, n, k);
  });

  it('codes within ±16383 with each row scaled to its largest weight, within half a step of the weights', () => {
    const bits = f32ToF16(w);
    for (let r = 0; r < n; r++) {
      let peak = 0;
      for (let i = 0; i < k; i++) {
        const q = rows.q[r * k + i];
        peak = Math.max(peak, Math.abs(q));
        assert.ok(Math.abs(q * rows.scales[r] - f16(bits[r * k + i])) <= rows.scales[r] / 2 + 1e-12, `row ${r} input ${i}`);
      }
      assert.equal(peak, I16_WEIGHT_RANGE, `row ${r}'s largest code`);
    }
  });

  it('matches the float64 product of the codes within f32 rounding, on every path', () => {
    for (const tokens of [1, T, 3]) {
      const y = runI16(packed, n, k, x, tokens, 0, panels);
      for (let t = 0; t < tokens; t++) {
        const { q: qx, scale: ts } = quantisedInputs(x.subarray(t * k, (t + 1) * k));
        for (let r = 0; r < n; r++) {
          let exact = 0;
          let mag = 0;
          for (let i = 0; i < k; i++) {
            const term = rows.q[r * k + i] * rows.scales[r] * qx[i] * ts;
            exact += term;
            mag += Math.abs(term);
          }
          const got = y[t * n + r];
          assert.ok(Math.abs(got - exact) <= 1e-6 * mag, `T=${tokens} token ${t} row ${r}: ${got} vs float64 ${exact} (sum of magnitudes ${mag})`);
        }
      }
    }
  });

  it('gives the same bits for a token alone, in a batch of tiles, and per panel range', () => {
    const one = runI16(packed, n, k, x, 1, 0, panels);
    const many = runI16(packed, n, k, x, T, 0, panels);
    // Tokens 0..3 take the four-token tile, 4 and 5 the one-token loop: each equals its lone run.
    for (let t = 0; t < T; t++) {
      const alone = runI16(packed, n, k, x.subarray(t * k), 1, 0, panels);
      assert.deepEqual(Array.from(many.subarray(t * n, (t + 1) * n)), Array.from(alone), `token ${t}`);
    }
    // One token: panels 0..3 in the four-panel loop, or one at a time.
    const split = [0, 1, 2, 3, 4, 5].map((p) => runI16(packed, n, k, x, 1, p, p + 1));
    const pieced = split.flatMap((y, p) => Array.from(y.subarray(p * 8, Math.min(n, p * 8 + 8))));
    assert.deepEqual(pieced, Array.from(one));
  });

  it('does not overflow i32 at the extremes: k = 16384, rows of ±largest weights against ±largest inputs', async () => {
    const K = 16384;
    const N = 8;
    // Row r: every weight (-1)^r, or alternating signs (rows 4..7), all inputs of one magnitude: every quad's
    // sum is ±4 * 16383 * 32767 (2,147,221,508), or cancels.
    const big = new Float32Array(N * K);
    for (let r = 0; r < N; r++) for (let i = 0; i < K; i++) big[r * K + i] = r < 4 ? (r % 2 ? -3 : 3) : i % 4 < 2 === (r % 2 === 0) ? 2 : -2;
    const xs = new Float32Array(K).fill(-0.5);
    const q = await quantizeRowsI16(f32ToF16(big), N, K);
    const y = runI16(i16Panels(q, N, K), N, K, xs, 1, 0, 1);
    const want = [-1.5 * K, 1.5 * K, -1.5 * K, 1.5 * K, 0, 0, 0, 0];
    // 4096 equal f32 additions: up to 4096 * 2^-24 of the sum (an overflow flips signs or loses 2^32).
    const tol = (K / 4) * 2 ** -24 * 1.5 * K;
    for (let r = 0; r < N; r++) assert.ok(Math.abs(y[r] - want[r]) <= tol, `row ${r}: ${y[r]}, want ${want[r]}`);
    const tiled = runI16(i16Panels(q, N, K), N, K, Float32Array.from({ length: 4 * K }, () => 0.5), 4, 0, 1);
    for (let t = 0; t < 4; t++) for (let r = 0; r < N; r++) assert.ok(Math.abs(tiled[t * N + r] + want[r]) <= tol, `tile token ${t} row ${r}: ${tiled[t * N + r]}`);
  });
});

/** The value of f16 bits. */
function f16(bits: number): number {
  const e = (bits >> 10) & 31;
  const m = bits & 1023;
  const v = e === 0 ? m * 2 ** -24 : (1 + m / 1024) * 2 ** (e - 15);
  return bits & 0x8000 ? -v : v;
}

describe('CPU i16 weights: storage choice', () => {
  const saved = process.env.RWKV_CPU_F16_AS;
  afterEach(() => {
    if (saved === undefined) delete process.env.RWKV_CPU_F16_AS;
    else process.env.RWKV_CPU_F16_AS = saved;
  });
  const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 64, vocabSize: 300, seed: 3 });

  it("stores f16 matrices as i16 by default, as f16 with RWKV_CPU_F16_AS=f16, and names a bad value", async () => {
    assert.equal(f16StorageFromEnv({}), 'i16');
    assert.equal(f16StorageFromEnv({ RWKV_CPU_F16_AS: 'f16' }), 'f16');
    assert.throws(() => f16StorageFromEnv({ RWKV_CPU_F16_AS: 'bf16' }), /RWKV_CPU_F16_AS must be 'f16' or 'i16', got "bf16"/);
    const kinds = async (precision: 'f16' | 'int8' | 'f32', quantLayers = 0) => {
      const plan = await planRwkv7Cpu(new Arena(), ck, describeModel(ck), { precision, quantLayers });
      return {
        layers: plan.weights.layers.map((l) => [l.r.kind, l.k.kind, l.v.kind, l.o.kind, l.w1.kind, l.a2.kind, l.ffnK.kind, l.ffnV.kind]),
        head: plan.weights.head.kind,
        hasI16: plan.weights.hasI16,
      };
    };
    const { i16, f16: half, int8, f32 } = MATRIX_KIND;
    delete process.env.RWKV_CPU_F16_AS;
    assert.deepEqual(await kinds('f16'), { layers: [Array(8).fill(i16), Array(8).fill(i16)], head: i16, hasI16: true });
    // int8 in the first layer: the later layer's matrices are f16, so i16.
    assert.deepEqual(await kinds('int8', 1), { layers: [Array(8).fill(int8), Array(8).fill(i16)], head: int8, hasI16: true });
    assert.deepEqual(await kinds('f32'), { layers: [Array(8).fill(f32), Array(8).fill(f32)], head: f32, hasI16: false });
    process.env.RWKV_CPU_F16_AS = 'f16';
    assert.deepEqual(await kinds('f16'), { layers: [Array(8).fill(half), Array(8).fill(half)], head: half, hasI16: false });
  });
});

describe('CPU i16 weights: backend', function () {
  this.timeout(300_000);
  const saved = process.env.RWKV_CPU_F16_AS;
  after(() => {
    if (saved === undefined) delete process.env.RWKV_CPU_F16_AS;
    else process.env.RWKV_CPU_F16_AS = saved;
  });
  const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 1000, seed: 11 });
  const prompt = Array.from({ length: 300 }, (_, i) => (i * 37 + 5) % 1000);

  it('logits close to the exact f16 products, the same bits on 1 and 2 threads, alone and batched, whole or in chunks', async () => {
    process.env.RWKV_CPU_F16_AS = 'f16';
    const exact = await createBackend({ model: ck, slots: 1, device: 'cpu', threads: 1, precision: 'f16' });
    delete process.env.RWKV_CPU_F16_AS;
    const one = await createBackend({ model: ck, slots: 2, device: 'cpu', threads: 1, precision: 'f16' });
    const two = await createBackend({ model: ck, slots: 2, device: 'cpu', threads: 2, precision: 'f16', maxTokens: 7, maxRows: 5 });
    try {
      const [a] = await exact.run([{ slot: 0, tokens: prompt, output: 'all' }]);
      const jobs = [
        { slot: 0, tokens: prompt, output: 'all' as const },
        { slot: 1, tokens: prompt.slice(0, 3), output: 'last' as const },
      ];
      const b = await one.run(jobs);
      const c = await two.run(jobs);
      b.forEach((x, i) => assert.deepEqual(Array.from(c[i]!), Array.from(x!), `job ${i}`));
      // A token at a time (one-token paths) equals the 300-token prefill (tiled paths).
      one.resetState(0);
      for (let t = 0; t < 40; t++) {
        const [r] = await one.run([{ slot: 0, tokens: [prompt[t]], output: 'last' }]);
        assert.deepEqual(Array.from(r!), Array.from(b[0]!.subarray(t * 1000, (t + 1) * 1000)), `token ${t} decoded alone`);
      }
      let d = 0;
      let s = 0;
      a!.forEach((v, i) => ((d += (v - b[0]![i]) ** 2), (s += v * v)));
      const rel = Math.sqrt(d / s);
      console.log(`      i16 vs exact f16 products, rel L2 of 300 tokens' logits ${rel.toExponential(2)}`);
      assert.ok(rel > 0 && rel < 2e-3, `rel L2 i16 vs f16 ${rel}`);
    } finally {
      exact.dispose();
      one.dispose();
      two.dispose();
    }
  });
});
