// The native AVX2 products (engine/cpu/native/products.c) against the WebAssembly kernels they stand in for: the
// same bits for int8 and i16 panels over every tile shape (1-2 panels, 1-6 tokens, blocks of tokens), partial
// last panels, panel ranges, odd k, strided outputs, accumulation and relu squared; calls they do not cover
// still go to WebAssembly; bad calls are refused before anything is touched. On x86-64 Linux the built addon
// must be there (the package ships it): a missing one fails here instead of being skipped.

import { strict as assert } from 'assert';
import * as fs from 'fs';
import { int8Panels } from '../engine/cpu/int8-quant';
import { i16Panels, quantizeRowsI16 } from '../engine/cpu/i16-quant';
import { KERNELS_FILE, instantiateKernels, kernelModule, type CpuKernels } from '../engine/cpu/wasm-kernels';
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

  it('the backend names the native products it runs: integer (f16 as i16, int8), f16 with RWKV_CPU_F16_AS=f16', async function () {
    if (!nativeAddon().addon) this.skip();
    const ck = randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 64, vocabSize: 100, seed: 3 });
    const saved = process.env.RWKV_CPU_F16_AS;
    const names: string[] = [];
    try {
      for (const [as, precision] of [['i16', 'f16'], ['f16', 'f16'], ['f16', 'int8']] as const) {
        process.env.RWKV_CPU_F16_AS = as;
        const be = await createBackend({ model: ck, slots: 1, device: 'cpu', threads: 1, precision });
        names.push(be.adapterName);
        be.dispose();
      }
    } finally {
      if (saved === undefined) delete process.env.RWKV_CPU_F16_AS;
      else process.env.RWKV_CPU_F16_AS = saved;
    }
    assert.match(names[0], /native AVX2 integer products/);
    assert.match(names[1], /native AVX2 f16 products/);
    assert.match(names[2], /native AVX2 integer and f16 products/);
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

    type Case = { kind: 0 | 2 | 3; n: number; k: number; T: number; p0?: number; p1?: number; act?: number; accum?: boolean; ys?: number; xs?: number };

    /**
     * f16 panels ([k][8] per panel, rows past n zero) of random halves: mostly normal weights of either sign, some
     * subnormal, zero and negative zero, and a few with the all-ones exponent (infinities and NaN patterns), which
     * both paths widen to the same finite values.
     */
    function halfPanels(n: number, k: number, rnd: () => number): Uint8Array {
      const out = new Uint16Array(Math.ceil(n / 8) * 8 * k);
      for (let o = 0; o < n; o++)
        for (let i = 0; i < k; i++) {
          const r = rnd();
          const sign = rnd() < 0.5 ? 0x8000 : 0;
          let h: number;
          if (r < 0.9) h = ((9 + Math.floor(rnd() * 8)) << 10) | Math.floor(rnd() * 1024); // about 2^-6 to 2
          else if (r < 0.96) h = Math.floor(rnd() * 1024); // subnormal (or zero)
          else if (r < 0.99) h = 0;
          else h = 0x7c00 | Math.floor(rnd() * 1024);
          out[(o >> 3) * 8 * k + i * 8 + (o & 7)] = sign | h;
        }
      return new Uint8Array(out.buffer);
    }

    async function compare(c: Case, seed: number, module?: WebAssembly.Module): Promise<void> {
      const rnd = seeded(seed);
      const w = Float32Array.from({ length: c.n * c.k }, () => (rnd() - 0.5) * 2);
      const panelsBytes =
        c.kind === 0 ? halfPanels(c.n, c.k, rnd) : c.kind === 2 ? await int8Panels(w, c.n, c.k) : i16Panels(await quantizeRowsI16(w, c.n, c.k), c.n, c.k);
      const xs = c.xs ?? c.k;
      // Inputs with an outlier per token, as real activations have.
      const x = Float32Array.from({ length: c.T * xs }, (_, i) => (i % 97 === 5 ? 40 : 1) * (rnd() - 0.5) * 4);
      const panels = Math.ceil(c.n / 8);
      const ys = c.ys ?? c.n;
      const [p0, p1] = [c.p0 ?? 0, c.p1 ?? panels];
      const runs: Uint32Array[] = [];
      for (const native of [false, true]) {
        const { memory, W, X, Y, S } = setup(panelsBytes, x);
        const wasm = instantiateKernels(memory, module, false);
        const k: CpuKernels = native ? withNativeProducts(wasm, memory) : wasm;
        const f = new Float32Array(memory.buffer, Y, c.T * ys);
        // Rows outside [p0, p1) and between strided outputs hold NaN bits and must keep them; accumulation adds
        // to values that are there.
        for (let i = 0; i < f.length; i++) f[i] = c.accum ? (i % 7) - 3 : NaN;
        k.matmul(W, c.n, c.k, c.kind, X, xs, Y, ys, c.T, c.act ?? 0, c.accum ? 1 : 0, p0, p1, S);
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
        for (const T of [1, 2, 3, 4, 5, 6, 7, 11, 13])
          for (const [n, k] of [[43, 37], [16, 64], [24, 130], [8, 9], [72, 20]]) await compare({ kind, n, k, T }, ++seed);
      });
      it(`${name}: panel ranges, strided outputs, accumulation and relu squared`, async () => {
        let seed = kind * 1000;
        await compare({ kind, n: 83, k: 70, T: 9, p0: 3, p1: 8 }, ++seed);
        await compare({ kind, n: 83, k: 70, T: 1, p0: 3, p1: 8, accum: true }, ++seed);
        await compare({ kind, n: 43, k: 50, T: 1, act: 3, ys: 51 }, ++seed);
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

    // f16: both WebAssembly builds, each against the native tiles that sum as it does (fused or not).
    const builds: [string, () => WebAssembly.Module | null][] = [
      ['plain SIMD (product, then sum)', () => new WebAssembly.Module(fs.readFileSync(KERNELS_FILE))],
      ['relaxed SIMD (fused multiply-add)', () => (kernelModule().variant === 'relaxed-simd' ? kernelModule().module : null)],
    ];
    for (const [build, moduleOf] of builds) {
      describe(`f16, ${build}`, function () {
        let module: WebAssembly.Module;
        before(function () {
          const m = moduleOf();
          if (!m) this.skip(); // no relaxed SIMD in this runtime
          module = m;
          const fused = instantiateKernels(new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true }), m, false).fusedMultiplyAdd();
          if (fused === 1 && !nativeAddon().addon!.fma) this.skip(); // the native path leaves it to WebAssembly
        });
        it('one token (four panels at a time, then pairs and a single one) and every tile shape, partial last panels', async () => {
          let seed = 5000;
          for (const T of [1, 2, 3, 4, 5, 6, 7, 11, 13])
            for (const [n, k] of [[43, 37], [16, 64], [24, 130], [8, 9], [72, 20], [57, 33]]) await compare({ kind: 0, n, k, T }, ++seed, module);
        });
        it('panel ranges, strided inputs and outputs, accumulation and relu squared', async () => {
          let seed = 6000;
          await compare({ kind: 0, n: 83, k: 70, T: 1, p0: 3, p1: 8 }, ++seed, module);
          await compare({ kind: 0, n: 83, k: 70, T: 9, p0: 3, p1: 8 }, ++seed, module);
          await compare({ kind: 0, n: 83, k: 70, T: 1, p0: 10, p1: 11 }, ++seed, module);
          await compare({ kind: 0, n: 40, k: 33, T: 7, ys: 47, xs: 35 }, ++seed, module);
          await compare({ kind: 0, n: 43, k: 50, T: 1, accum: true }, ++seed, module);
          await compare({ kind: 0, n: 43, k: 50, T: 6, accum: true }, ++seed, module);
          await compare({ kind: 0, n: 43, k: 50, T: 1, act: 3 }, ++seed, module);
          await compare({ kind: 0, n: 43, k: 50, T: 10, act: 3 }, ++seed, module);
          await compare({ kind: 0, n: 43, k: 50, T: 5, act: 3, accum: true, ys: 51, xs: 52, p0: 1, p1: 6 }, ++seed, module);
        });
        it('many tokens in blocks of tokens (k = 3072: blocks of 6), past the WebAssembly path that widens into scratch', async () => {
          await compare({ kind: 0, n: 24, k: 3072, T: 20 }, 7000, module);
        });
      });
    }

    it('leaves tanh, sigmoid and f32 panels to WebAssembly', async () => {
      const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
      const calls: number[][] = [];
      const wasm = instantiateKernels(memory, undefined, false);
      const spy: CpuKernels = { ...wasm, matmul: (...a: number[]) => void calls.push(a) } as CpuKernels;
      let native = 0;
      let half = 0;
      const k = withNativeProducts(spy, memory, { products: () => void native++, halfProducts: () => void half++, fma: true });
      k.matmul(0, 8, 8, 2, 0, 8, 0, 8, 4, 1, 0, 0, 1, 0); // tanh
      k.matmul(0, 8, 8, 3, 0, 8, 0, 8, 4, 2, 0, 0, 1, 0); // sigmoid
      k.matmul(0, 8, 8, 0, 0, 8, 0, 8, 1, 1, 0, 0, 1, 0); // f16, tanh
      k.matmul(0, 8, 8, 1, 0, 8, 0, 8, 4, 0, 0, 0, 1, 0); // f32 panels
      assert.equal(calls.length, 4);
      assert.equal(native + half, 0);
      k.matmul(0, 8, 8, 2, 0, 8, 0, 8, 4, 3, 0, 0, 1, 0);
      k.matmul(0, 8, 8, 3, 0, 8, 0, 8, 1, 0, 0, 0, 1, 0); // i16, one token: bound by memory, prefetched natively
      k.matmul(0, 8, 8, 2, 0, 8, 0, 8, 1, 3, 0, 0, 1, 0); // int8, one token
      assert.equal(native, 3);
      k.matmul(0, 8, 8, 0, 0, 8, 0, 8, 1, 0, 0, 0, 1, 0); // f16, one token
      k.matmul(0, 8, 8, 0, 0, 8, 0, 8, 4, 3, 0, 0, 1, 0); // f16, relu squared
      assert.equal(half, 2);
      assert.equal(calls.length, 4);
    });

    it('leaves f16 to WebAssembly where its multiply-adds fuse and the CPU has no FMA', () => {
      const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
      const wasm = instantiateKernels(memory, undefined, false);
      let calls = 0;
      let half = 0;
      const spy: CpuKernels = { ...wasm, matmul: () => void calls++, fusedMultiplyAdd: () => 1 } as CpuKernels;
      withNativeProducts(spy, memory, { products: () => {}, halfProducts: () => void half++, fma: false }).matmul(0, 8, 8, 0, 0, 8, 0, 8, 1, 0, 0, 0, 1, 0);
      assert.deepEqual([calls, half], [1, 0]);
      const plain: CpuKernels = { ...spy, fusedMultiplyAdd: () => 0 } as CpuKernels;
      withNativeProducts(plain, memory, { products: () => {}, halfProducts: () => void half++, fma: false }).matmul(0, 8, 8, 0, 0, 8, 0, 8, 1, 0, 0, 0, 1, 0);
      assert.deepEqual([calls, half], [1, 1]);
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

    it('halfProducts: refuses a range outside the memory, a bad shape, activation or fused flag, and a wrong argument count', () => {
      const { addon } = nativeAddon();
      const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
      const view = new Uint8Array(memory.buffer);
      // w n k x xs y ys T act accum p0 p1 fused
      type Args = [number, number, number, number, number, number, number, number, number, number, number, number, number];
      const ok: Args = [0, 8, 8, 4096, 8, 8192, 8, 4, 0, 0, 0, 1, 0];
      addon!.halfProducts(view, ...ok);
      const bad = (i: number, v: number) => {
        const a = ok.slice() as Args;
        a[i] = v;
        return () => addon!.halfProducts(view, ...a);
      };
      assert.throws(bad(0, 65536 - 64), /outside the memory/); // weights past the end
      assert.throws(bad(5, 65536 - 8), /outside the memory/); // outputs past the end
      assert.throws(bad(3, 65536 - 16), /outside the memory/); // inputs past the end
      assert.throws(bad(7, 5000), /outside the memory/); // too many tokens for the inputs
      assert.throws(bad(4, 7), /bad shape/); // input rows overlapping (xs < k)
      assert.throws(bad(8, 1), /act must be/);
      assert.throws(bad(12, 2), /fused must be/);
      assert.throws(bad(11, 2), /bad shape/); // more panels than rows
      assert.throws(bad(1, 2 ** 31), /below 2\^31/);
      assert.throws(bad(3, 4098), /aligned/);
      assert.throws(() => (addon!.halfProducts as unknown as (...a: unknown[]) => void)(view, 1, 2), /14 arguments/);
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
