// int8 weights on the CPU backend (precision 'int8'; the per-row quantizer's round trip is in quant.test.ts): the kernels' int8
// product against a float64 reference (every code path: one token over two panels and a partial one, many
// tokens four at a time and singly), and the backend's logits against f32 weights.

import { strict as assert } from 'assert';
import { int8Panels, int8ScratchBytes } from '../engine/cpu/int8-quant';
import { dequantizeRowsInt8, quantizeRowsInt8 } from '../engine/quant/int8-rows';
import { instantiateKernels } from '../engine/cpu/wasm-kernels';
import { createBackend } from '../engine/backend';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { parseModelConfig } from '../nodes/shared/model-config';
import { checkEngineConfig } from '../engine/engine-config';

function seeded(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

describe('CPU int8 weights: kernels', () => {
  // 43 rows: five whole panels and one of three rows; k not a multiple of 4 or 8.
  const n = 43;
  const k = 37;
  const T = 6;
  const rnd = seeded(5);
  const w = Float32Array.from({ length: n * k }, () => (rnd() - 0.5) * 2);
  const x = Float32Array.from({ length: T * k }, () => (rnd() - 0.5) * 4);
  const panels = Math.ceil(n / 8);
  let packed: Uint8Array;
  before(async () => {
    packed = await int8Panels(w, n, k);
  });
  const { q, scales } = quantizeRowsInt8(w, n, k);
  const deq = dequantizeRowsInt8(q, scales, k);

  function run(tokens: number, p0 = 0, p1 = panels, first = 0): Float32Array {
    const memory = new WebAssembly.Memory({ initial: 4, maximum: 4, shared: true });
    const kern = instantiateKernels(memory);
    const W = 65536;
    const X = W + 65536;
    const Y = X + 32768;
    const S = Y + 32768;
    new Uint8Array(memory.buffer).set(packed, W);
    new Float32Array(memory.buffer).set(x.subarray(first * k, (first + tokens) * k), X / 4);
    // ys > n: the rows between are left alone.
    const ys = n + 5;
    new Float32Array(memory.buffer).fill(NaN, Y / 4, Y / 4 + tokens * ys);
    kern.matmul(W, n, k, 2, X, k, Y, ys, tokens, 0, 0, p0, p1, S);
    const f = new Float32Array(memory.buffer);
    const out = new Float32Array(tokens * n);
    for (let t = 0; t < tokens; t++) out.set(f.subarray(Y / 4 + t * ys, Y / 4 + t * ys + n), t * n);
    return out;
  }

  it('matches the float64 product of the dequantized weights, and the true weights within the int8 bound', () => {
    for (const tokens of [1, T, 3]) {
      const y = run(tokens);
      for (let t = 0; t < tokens; t++) {
        for (let r = 0; r < n; r++) {
          let exact = 0;
          let trueY = 0;
          let mag = 0;
          let bound = 0;
          let xmax = 0;
          for (let i = 0; i < k; i++) xmax = Math.max(xmax, Math.abs(x[t * k + i]));
          // Inputs are quantized to i16 per token: each within half a step of max|x| / 32767.
          let inputBound = 0;
          for (let i = 0; i < k; i++) {
            inputBound += Math.abs(deq[r * k + i]) * (xmax / 32767 / 2);
            const xi = x[t * k + i];
            exact += deq[r * k + i] * xi;
            trueY += w[r * k + i] * xi;
            mag += Math.abs(deq[r * k + i] * xi);
            bound += (scales[r] / 2) * Math.abs(xi);
          }
          const got = y[t * n + r];
          const label = `T=${tokens} token ${t} row ${r}`;
          assert.ok(Math.abs(got - exact) <= inputBound + 1e-6 * mag, `${label}: ${got} vs float64 ${exact}, bound ${inputBound}`);
          assert.ok(Math.abs(got - trueY) <= bound + inputBound + 1e-6 * mag, `${label}: ${got} vs unquantized ${trueY}, bound ${bound}`);
        }
      }
    }
  });

  it('gives the same bits for a token alone, in a batch, and per panel range', () => {
    const one = run(1);
    const many = run(T);
    assert.deepEqual(Array.from(many.subarray(0, n)), Array.from(one));
    // Tokens 0..3 take the four-token tile, 4 and 5 the one-token loop: each equals its lone run.
    for (let t = 1; t < T; t++) assert.deepEqual(Array.from(many.subarray(t * n, (t + 1) * n)), Array.from(run(1, 0, panels, t)), `token ${t}`);
    const split = run(1, 0, 1);
    const rest = run(1, 1, panels);
    assert.deepEqual([...split.subarray(0, 8), ...rest.subarray(8)], Array.from(one));
  });
});

describe('CPU int8 weights: prefill in blocks of tokens', () => {
  // k = 3000: 6,000 bytes of quantized inputs a token, so a block holds 20 tokens (kernels.ts TOKEN_BLOCK_BYTES);
  // 45 tokens are two whole blocks and one of 5 (a four-token tile, then one token alone), over three panels,
  // the last of 4 rows.
  const n = 20;
  const k = 3000;
  const T = 45;
  const rnd = seeded(9);
  const w = Float32Array.from({ length: n * k }, () => (rnd() - 0.5) * 2);
  const x = Float32Array.from({ length: T * k }, () => (rnd() - 0.5) * 4);

  async function product(tokens: number, first: number, packed: Uint8Array): Promise<Float32Array> {
    const memory = new WebAssembly.Memory({ initial: 32, maximum: 32, shared: true });
    const kern = instantiateKernels(memory);
    const W = 65536;
    const X = W + packed.length + 64;
    const Y = X + T * k * 4;
    const S = Y + T * n * 4 + 64;
    assert.ok(S + int8ScratchBytes(T, k) <= 32 * 65536);
    new Uint8Array(memory.buffer).set(packed, W);
    new Float32Array(memory.buffer).set(x.subarray(first * k, (first + tokens) * k), X / 4);
    kern.matmul(W, n, k, 2, X, k, Y, n, tokens, 0, 0, 0, Math.ceil(n / 8), S);
    return new Float32Array(memory.buffer).slice(Y / 4, Y / 4 + tokens * n);
  }

  it('gives every token the bits of its lone run, and the integer products of the quantized values', async () => {
    const packed = await int8Panels(w, n, k);
    const { q, scales } = quantizeRowsInt8(w, n, k);
    const all = await product(T, 0, packed);
    const range = Math.min(32767, Math.floor(2147483647 / (254 * Math.ceil(k / 2))));
    for (let t = 0; t < T; t++) {
      const alone = await product(1, t, packed);
      assert.deepEqual(Array.from(all.subarray(t * n, (t + 1) * n)), Array.from(alone), `token ${t}`);
      // The reference: inputs quantized as the kernel does (round half to even of x * range / max|x|), exact
      // integer sums, then the two scales.
      let m = 0;
      for (let i = 0; i < k; i++) m = Math.max(m, Math.abs(x[t * k + i]));
      const inv = Math.fround(range / m);
      for (let r = 0; r < n; r++) {
        let sum = 0;
        for (let i = 0; i < k; i++) {
          const v = Math.fround(x[t * k + i] * inv);
          let xq = Math.round(v);
          if (Math.abs(v % 1) === 0.5 && xq % 2 !== 0) xq -= 1;
          sum += q[r * k + i] * xq;
        }
        const want = Math.fround(Math.fround(sum * Math.fround(m / range)) * scales[r]);
        const got = all[t * n + r];
        assert.ok(Math.abs(got - want) <= 2e-6 * Math.abs(want) + 1e-9, `token ${t} row ${r}: ${got} vs ${want}`);
      }
    }
  });
});

describe('CPU int8 weights: backend', function () {
  this.timeout(120_000);
  const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 1000, seed: 11 });
  const prompt = Array.from({ length: 40 }, (_, i) => (i * 37 + 5) % 1000);

  it('runs int8 weights on the CPU (also under auto on a software adapter), close to f32, and refuses nf4', async () => {
    const full = await createBackend({ model: ck, slots: 1, device: 'cpu', threads: 1, precision: 'f32' });
    const q8 = await createBackend({ model: ck, slots: 1, threads: 1, precision: 'int8' });
    try {
      assert.match(q8.adapterName, /^CPU: .*int8 weights/);
      assert.ok(q8.weightBytes < full.weightBytes * 0.6, `int8 ${q8.weightBytes} bytes vs f32 ${full.weightBytes}`);
      const [a] = await full.run([{ slot: 0, tokens: prompt, output: 'last' }]);
      const [b] = await q8.run([{ slot: 0, tokens: prompt, output: 'last' }]);
      let d = 0;
      let s = 0;
      a!.forEach((v, i) => ((d += (v - b![i]) ** 2), (s += v * v)));
      const rel = Math.sqrt(d / s);
      console.log(`      int8 vs f32 rel L2 ${rel.toExponential(2)}`);
      assert.ok(rel > 0 && rel < 3e-2, `rel L2 int8 vs f32 ${rel}`);
    } finally {
      full.dispose();
      q8.dispose();
    }
    await assert.rejects(createBackend({ model: ck, slots: 1, device: 'cpu', precision: 'nf4' }), /'nf4' runs on the GPU backend only/);
  });

  it('gives the same bits on 1 and 2 threads, alone and batched, in one call or in chunks', async () => {
    const one = await createBackend({ model: ck, slots: 2, device: 'cpu', threads: 1, precision: 'int8' });
    const two = await createBackend({ model: ck, slots: 2, device: 'cpu', threads: 2, precision: 'int8', maxTokens: 7, maxRows: 5 });
    try {
      const jobs = [
        { slot: 0, tokens: prompt, output: 'all' as const },
        { slot: 1, tokens: prompt.slice(0, 3), output: 'last' as const },
      ];
      const a = await one.run(jobs);
      const b = await two.run(jobs);
      a.forEach((x, i) => assert.deepEqual(Array.from(b[i]!), Array.from(x!), `job ${i}`));
    } finally {
      one.dispose();
      two.dispose();
    }
  });
});

describe('CPU int8 weights: configuration', () => {
  it("admits precision 'int8' in the model configuration and the engine config, and still names bad values", () => {
    assert.equal(parseModelConfig({ precision: 'int8' }).precision, 'int8');
    assert.throws(() => parseModelConfig({ precision: 'int4' }), /precision.*"f16", "f32", "int8" or "nf4"/);
    checkEngineConfig({ precision: 'int8' });
    assert.throws(() => checkEngineConfig({ precision: 'q8' as never }), /precision must be 'f16', 'f32', 'int8' or 'nf4'/);
  });
});
