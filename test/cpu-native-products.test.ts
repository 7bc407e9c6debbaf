// The native AVX2 products (engine/cpu/native/products.c) against the WebAssembly kernels they stand in for: the
// same bits for int8 and i16 panels over every tile shape (1-2 panels, 1-6 tokens, blocks of tokens), partial
// last panels, panel ranges, odd k, strided outputs, accumulation and relu squared; calls they do not cover
// still go to WebAssembly; bad calls are refused before anything is touched. On x86-64 Linux the built addon
// must be there (the package ships it): a missing one fails here instead of being skipped.

import { strict as assert } from 'assert';
import * as fs from 'fs';
import { int8Panels } from '../engine/cpu/int8-quant';
import { i16Panels, quantizeRowsI16 } from '../engine/cpu/i16-quant';
import { instantiateKernels, type CpuKernels } from '../engine/cpu/wasm-kernels';
import { createBackend } from '../engine/backend';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { NATIVE_PRODUCTS_FILE, nativeAddon, productsPath, withNativeProducts } from '../engine/cpu/native-products';

function seeded(seed: number) {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

function hasAvx2(): boolean {
  if (process.platform !== 'linux' || process.arch !== 'x64') return false;
  const flags = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m)?.[1] ?? '';
  return flags.split(/\s+/).includes('avx2');
}

describe('CPU native products (AVX2)', function () {
  const expected = hasAvx2() && process.env.RWKV_CPU_NATIVE !== 'off';

  it('loads wherever the package builds it (x86-64 Linux with AVX2)', function () {
    if (!expected) this.skip();
    assert.ok(fs.existsSync(NATIVE_PRODUCTS_FILE), `${NATIVE_PRODUCTS_FILE} is missing: run npm run build`);
    assert.equal(nativeAddon().why, 'loaded');
    assert.equal(productsPath(), 'native-avx2');
  });

  describe('same bits as the WebAssembly kernels', function () {
    before(function () {
      if (!nativeAddon().addon) this.skip();
    });

    const MiB = 1 << 20;
    /** One memory with the panels at W, inputs at X, outputs at Y (NaN-filled), scratch at S. */
    function setup(panels: Uint8Array, x: Float32Array) {
      const memory = new WebAssembly.Memory({ initial: 256, maximum: 256, shared: true });
      const u8 = new Uint8Array(memory.buffer);
      u8.set(panels, 0);
      const X = Math.ceil(panels.length / MiB + 1) * MiB;
      new Float32Array(memory.buffer).set(x, X / 4);
      return { memory, W: 0, X, Y: X + 2 * MiB, S: X + 3 * MiB };
    }

    function outputs(memory: WebAssembly.Memory, Y: number, T: number, ys: number): Uint32Array {
      return new Uint32Array(memory.buffer, Y, T * ys).slice();
    }

    type Case = { kind: 2 | 3; n: number; k: number; T: number; p0?: number; p1?: number; act?: number; accum?: boolean; ys?: number };

    async function compare(c: Case, seed: number): Promise<void> {
      const rnd = seeded(seed);
      const w = Float32Array.from({ length: c.n * c.k }, () => (rnd() - 0.5) * 2);
      const panelsBytes = c.kind === 2 ? await int8Panels(w, c.n, c.k) : i16Panels(await quantizeRowsI16(w, c.n, c.k), c.n, c.k);
      // Inputs with an outlier per token, as real activations have.
      const x = Float32Array.from({ length: c.T * c.k }, (_, i) => (i % 97 === 5 ? 40 : 1) * (rnd() - 0.5) * 4);
      const panels = Math.ceil(c.n / 8);
      const ys = c.ys ?? c.n;
      const [p0, p1] = [c.p0 ?? 0, c.p1 ?? panels];
      const runs: Uint32Array[] = [];
      for (const native of [false, true]) {
        const { memory, W, X, Y, S } = setup(panelsBytes, x);
        const wasm = instantiateKernels(memory, undefined, false);
        const k: CpuKernels = native ? withNativeProducts(wasm, memory) : wasm;
        const f = new Float32Array(memory.buffer, Y, c.T * ys);
        // Rows outside [p0, p1) and between strided outputs hold NaN bits and must keep them; accumulation adds
        // to values that are there.
        for (let i = 0; i < f.length; i++) f[i] = c.accum ? (i % 7) - 3 : NaN;
        k.matmul(W, c.n, c.k, c.kind, X, c.k, Y, ys, c.T, c.act ?? 0, c.accum ? 1 : 0, p0, p1, S);
        runs.push(outputs(memory, Y, c.T, ys));
      }
      const [a, b] = runs;
      for (let i = 0; i < a.length; i++) {
        if (a[i] !== b[i]) {
          const t = Math.floor(i / ys);
          assert.fail(`${JSON.stringify(c)}: token ${t} row ${i % ys}: wasm ${a[i].toString(16)}, native ${b[i].toString(16)}`);
        }
      }
    }

    for (const kind of [2, 3] as const) {
      const name = kind === 2 ? 'int8' : 'i16';
      it(`${name}: every tile shape, odd panels and partial last panels`, async () => {
        let seed = kind * 100;
        for (const T of [2, 3, 4, 5, 6, 7, 11, 13])
          for (const [n, k] of [[43, 37], [16, 64], [24, 130], [8, 9]]) await compare({ kind, n, k, T }, ++seed);
      });
      it(`${name}: panel ranges, strided outputs, accumulation and relu squared`, async () => {
        let seed = kind * 1000;
        await compare({ kind, n: 83, k: 70, T: 9, p0: 3, p1: 8 }, ++seed);
        await compare({ kind, n: 83, k: 70, T: 9, p0: 10, p1: 11 }, ++seed);
        await compare({ kind, n: 40, k: 33, T: 7, ys: 47 }, ++seed);
        await compare({ kind, n: 43, k: 50, T: 6, accum: true }, ++seed);
        await compare({ kind, n: 43, k: 50, T: 10, act: 3 }, ++seed);
        await compare({ kind, n: 43, k: 50, T: 5, act: 3, accum: true, ys: 51, p0: 1, p1: 6 }, ++seed);
      });
      it(`${name}: many tokens in blocks of tokens (k = 3072: blocks of ${kind === 2 ? 30 : 16})`, async () => {
        await compare({ kind, n: 24, k: 3072, T: 70 }, kind * 7);
      });
    }

    it('leaves tanh, sigmoid, one token and float panels to WebAssembly', async () => {
      const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
      const calls: number[][] = [];
      const wasm = instantiateKernels(memory, undefined, false);
      const spy: CpuKernels = { ...wasm, matmul: (...a: number[]) => void calls.push(a) } as CpuKernels;
      let native = 0;
      const k = withNativeProducts(spy, memory, { products: () => void native++ });
      k.matmul(0, 8, 8, 2, 0, 8, 0, 8, 4, 1, 0, 0, 1, 0); // tanh
      k.matmul(0, 8, 8, 3, 0, 8, 0, 8, 4, 2, 0, 0, 1, 0); // sigmoid
      k.matmul(0, 8, 8, 2, 0, 8, 0, 8, 1, 0, 0, 0, 1, 0); // one token
      k.matmul(0, 8, 8, 0, 0, 8, 0, 8, 4, 0, 0, 0, 1, 0); // f16 panels
      assert.equal(calls.length, 4);
      assert.equal(native, 0);
      k.matmul(0, 8, 8, 2, 0, 8, 0, 8, 4, 3, 0, 0, 1, 0);
      assert.equal(native, 1);
    });

    it('refuses a range outside the memory, a bad kind or activation, and a wrong argument count', () => {
      const { addon } = nativeAddon();
      const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
      const view = new Uint8Array(memory.buffer);
      const ok: [number, number, number, number, number, number, number, number, number, number, number, number] = [0, 8, 8, 2, 4096, 8192, 8, 4, 0, 0, 0, 1];
      addon!.products(view, ...ok);
      const bad = (i: number, v: number) => {
        const a = ok.slice() as typeof ok;
        a[i] = v;
        return () => addon!.products(view, ...a);
      };
      assert.throws(bad(0, 65536 - 16), /outside the memory/); // weights past the end
      assert.throws(bad(5, 65536 - 8), /outside the memory/); // outputs past the end
      assert.throws(bad(7, 5000), /outside the memory/); // tokens' inputs past the end
      assert.throws(bad(3, 1), /kind must be/);
      assert.throws(bad(8, 1), /act must be/);
      assert.throws(bad(11, 2), /bad shape/); // more panels than rows
      assert.throws(bad(1, 2 ** 31), /below 2\^31/); // a row count that would wrap an int
      assert.throws(bad(4, -1), /integer/);
      assert.throws(bad(4, 1.5), /integer/);
      assert.throws(() => (addon!.products as unknown as (...a: unknown[]) => void)(view, 1, 2), /13 arguments/);
      assert.throws(() => addon!.products(new Float32Array(4) as unknown as Uint8Array, ...ok), /Uint8Array/);
    });
  });

  it('gives a model the same logits as the WebAssembly kernels alone (f16 and int8 weights, 2 threads, batched, chunked)', async function () {
    if (!nativeAddon().addon) this.skip();
    this.timeout(120_000);
    const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 1000, seed: 23 });
    const prompt = Array.from({ length: 45 }, (_, i) => (i * 41 + 3) % 1000);
    const jobs = [
      { slot: 0, tokens: prompt, output: 'all' as const },
      { slot: 1, tokens: prompt.slice(0, 9), output: 'last' as const },
    ];
    const saved = process.env.RWKV_CPU_NATIVE;
    for (const precision of ['f16', 'int8'] as const) {
      const runs: (Float32Array | null)[][] = [];
      for (const mode of ['off', 'auto']) {
        // Read by the compute and helper threads as they start (each loads the addon or not for itself).
        process.env.RWKV_CPU_NATIVE = mode;
        const be = await createBackend({ model: ck, slots: 2, device: 'cpu', threads: 2, precision, maxTokens: 16 });
        try {
          runs.push((await be.run(jobs)).map((r) => (r ? Float32Array.from(r) : null)));
        } finally {
          be.dispose();
          if (saved === undefined) delete process.env.RWKV_CPU_NATIVE;
          else process.env.RWKV_CPU_NATIVE = saved;
        }
      }
      runs[0].forEach((x, i) => assert.deepEqual(new Uint32Array(runs[1][i]!.buffer), new Uint32Array(x!.buffer), `${precision} job ${i}`));
    }
  });
});
