// The CPU kernels' vector exp (engine/cpu/kernels/kernels.ts `vexp`) and the activations built on it (the
// LoRA stages' tanh and sigmoid, applied as a product is stored): accuracy against Math over the whole f32
// range, and the limits where the input is clamped, in both builds of the kernels (plain SIMD and FMA).

import { strict as assert } from 'assert';
import * as fs from 'fs';
import { KERNELS_FILE, RELAXED_KERNELS_FILE, instantiateKernels, kernelModule } from '../engine/cpu/wasm-kernels';

const builds: [string, () => WebAssembly.Module][] = [
  ['simd', () => new WebAssembly.Module(fs.readFileSync(KERNELS_FILE))],
  // kernelModule() turns on relaxed SIMD where the runtime needs a flag for it; skipped where it has none.
  ['relaxed-simd', () => (kernelModule().variant === 'relaxed-simd' ? new WebAssembly.Module(fs.readFileSync(RELAXED_KERNELS_FILE)) : null!)],
];

/** The f32 unit in the last place at v's magnitude. */
const ulp = (v: number) => 2 ** (Math.floor(Math.log2(Math.abs(v))) - 23);

for (const [name, load] of builds) {
  describe(`CPU kernels (${name}): vector exp and activations`, function () {
    let module: WebAssembly.Module | null = null;
    before(function () {
      module = load();
      if (!module) this.skip();
    });

    function kernels() {
      const memory = new WebAssembly.Memory({ initial: 64, maximum: 64, shared: true });
      return { k: instantiateKernels(memory, module!), f: new Float32Array(memory.buffer) };
    }

    it('exp is within 2 ulp of Math.exp on [-87, 88] and saturates to finite limits outside', () => {
      const { k, f } = kernels();
      const n = 200_000;
      const X = 65536;
      const O = X + n * 4;
      for (let i = 0; i < n; i++) f[X / 4 + i] = Math.fround(-87 + (175 * i) / (n - 1));
      k.expInto(X, n, O);
      let worst = 0;
      for (let i = 0; i < n; i++) {
        const e = Math.exp(f[X / 4 + i]);
        worst = Math.max(worst, Math.abs(f[O / 4 + i] - e) / ulp(e));
      }
      assert.ok(worst <= 2, `worst error ${worst.toFixed(2)} ulp`);
      f.set([-1e4, -88, 1e4, 89, 0, -0, 1, -1], X / 4);
      k.expInto(X, 8, O);
      const [lo1, lo2, hi1, hi2, z, nz, one, inv] = f.subarray(O / 4, O / 4 + 8);
      for (const v of [lo1, lo2]) assert.ok(v > 0 && v < 2e-38, `exp of a very negative input: ${v}`);
      for (const v of [hi1, hi2]) assert.ok(Number.isFinite(v) && v > 1e38, `exp of a very large input: ${v}`);
      assert.equal(z, 1);
      assert.equal(nz, 1);
      assert.ok(Math.abs(one - Math.E) <= 2 * ulp(Math.E) && Math.abs(inv - 1 / Math.E) <= 2 * ulp(1 / Math.E));
    });

    // A one-input f32 matrix whose rows hold the test values, times x = 1: y[r] = act(v[r]). 13 rows: one whole
    // panel (stored as vectors) and a partial one (stored row by row).
    function activate(act: number, values: number[]): Float32Array {
      const { k, f } = kernels();
      const n = values.length;
      const panels = Math.ceil(n / 8);
      const W = 65536;
      const X = W + panels * 32;
      const Y = X + 64;
      values.forEach((v, r) => (f[W / 4 + (r >> 3) * 8 + (r & 7)] = v));
      f[X / 4] = 1;
      k.matmul(W, n, 1, 1, X, 1, Y, n, 1, act, 0, 0, panels, 0);
      return f.slice(Y / 4, Y / 4 + n);
    }

    const values = [-200, -20, -9, -3, -0.5, -1e-3, 0, 1e-3, 0.25, 2, 8, 20, 200];

    it('tanh (act 1) within 2e-7 of Math.tanh, exactly ±1 far out and 0 at 0', () => {
      const y = activate(1, values);
      values.forEach((v, i) => assert.ok(Math.abs(y[i] - Math.tanh(v)) <= 2e-7, `tanh(${v}) = ${y[i]}, expected ${Math.tanh(v)}`));
      assert.equal(y[0], -1);
      assert.equal(y[values.length - 1], 1);
      assert.equal(y[values.indexOf(0)], 0);
    });

    it('sigmoid (act 2) within 2 ulp + 1e-9 of the exact value, 1 far out, never negative', () => {
      const y = activate(2, values);
      values.forEach((v, i) => {
        const s = 1 / (1 + Math.exp(-v));
        assert.ok(Math.abs(y[i] - s) <= 2 * ulp(s) + 1e-9, `sigmoid(${v}) = ${y[i]}, expected ${s}`);
        assert.ok(y[i] >= 0 && y[i] <= 1);
      });
      assert.equal(y[values.length - 1], 1);
      assert.equal(y[values.indexOf(0)], 0.5);
    });
  });
}
