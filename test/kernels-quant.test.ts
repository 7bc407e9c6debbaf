// The matrix kernels reading quantised weights (shaders/weights_i8.wgsl, weights_nf4.wgsl) on this device
// (lavapipe here, the 'f32' kernel path): a group of two matrices (a tanh output, and one accumulating into y)
// packed by quant/gpu-matrix-group.ts, on the streaming and both tiled kernels, against the float64 product of
// the dequantised weights. The weights are exactly the dequantised values and the arithmetic is f32, so the
// bound is f32 rounding (1e-6), far below any quantisation error: a misplaced scale or code fails it.

import { strict as assert } from 'assert';
import { acquireGpu, releaseGpu, type GpuContext } from '../engine/gpu/device';
import { chooseMatmul, describeKernels, matmulShader, SEGMENT_ALIGN, type MatmulVariant } from '../engine/rwkv7/matmul';
import { packQuantizedGroup, type QuantizedFormat } from '../engine/quant/gpu-matrix-group';
import { dequantizeRowsInt8, quantizeRowsInt8 } from '../engine/quant/int8-rows';
import { dequantizeNf4, quantizeNf4 } from '../engine/quant/nf4-blocks';
import { matrixSegments } from '../engine/rwkv7/weights';
import { runGroupedProduct, values } from './grouped-product';

/** The weights the kernels should see: each matrix dequantised as packQuantizedGroup quantised it. */
function dequantised(mats: { data: Float32Array; n: number; k: number }[], format: QuantizedFormat): Float32Array[] {
  if (format === 'int8') return mats.map((m) => {
    const { q, scales } = quantizeRowsInt8(m.data, m.n, m.k);
    return dequantizeRowsInt8(q, scales, m.k);
  });
  const flat = new Float32Array(mats.reduce((a, m) => a + m.data.length, 0));
  let off = 0;
  for (const m of mats) (flat.set(m.data, off), (off += m.data.length));
  const back = dequantizeNf4(quantizeNf4(flat), flat.length);
  off = 0;
  return mats.map((m) => back.slice(off, (off += m.data.length)));
}

async function quantisedProduct(gpu: GpuContext, format: QuantizedFormat, v: MatmulVariant, rows: number) {
  // 72 rows (a second 64-row block of virtual rows) and 96 rows starting at virtual row 128; rows of different
  // magnitudes so a scale read from the wrong row shows.
  const mats = [
    { name: 'a', n: 72, k: 96, data: values(72 * 96, 3).map((x, i) => x * (1 + Math.floor(i / 96) % 7)) },
    // Rows long enough that a streaming lane takes whole trips of loads and then a tail (mm_vec.wgsl: a stride of
    // 256 inputs at 32 lanes, LOADS a trip; 1,056 = 4 × 256 + 32).
    { name: 'b', n: 96, k: 1056, data: values(96 * 1056, 4, 0.1).map((x, i) => x * (1 + Math.floor(i / 1056) % 5)) },
  ];
  const packed = await packQuantizedGroup(mats, format, SEGMENT_ALIGN);
  const deq = dequantised(mats, format);
  const { got, want, xs } = await runGroupedProduct(gpu, {
    variant: v,
    rows,
    words: packed.words,
    group: { segs: matrixSegments(mats), format, scaleWord: packed.scaleWord },
    mats: mats.map((m, s) => ({ n: m.n, k: m.k, weights: deq[s] })),
  });
  // The same product with the unquantised weights: the quantisation error must be there, and small.
  let qNum = 0;
  let qDen = 0;
  mats.forEach((m, s) => {
    for (let t = 0; t < rows; t++) {
      for (let o = 0; o < m.n; o++) {
        let exact = 0;
        let approx = 0;
        for (let k = 0; k < m.k; k++) {
          exact += m.data[o * m.k + k] * xs[s][t * m.k + k];
          approx += deq[s][o * m.k + k] * xs[s][t * m.k + k];
        }
        qNum += (exact - approx) ** 2;
        qDen += exact ** 2;
      }
    }
  });
  return { got, want, quantError: Math.sqrt(qNum / qDen) };
}

describe('kernel choice for quantised groups', () => {
  it('reads int8 and nf4 through their includes, never on the f16-only subgroup-matrix kernel', () => {
    const c = { kernelPath: 'subgroup-matrix' as const, subgroup32: true, vecMaxRows: 8, gemmTile: 64 as const };
    assert.equal(chooseMatmul(64, { ...c, precision: 'f16' }).kind, 'sgmat');
    for (const precision of ['int8', 'nf4'] as const) {
      assert.deepEqual(chooseMatmul(64, { ...c, precision }), { kind: 'gemm', tile: 64 });
      assert.equal(chooseMatmul(8, { ...c, precision }).kind, 'vec');
      const include = precision === 'int8' ? 'weights_i8' : 'weights_nf4';
      assert.ok(matmulShader({ kind: 'vec', tb: 4 }, { ...c, precision }).parts.includes(include));
      assert.ok(matmulShader({ kind: 'gemm', tile: 16 }, { ...c, precision }).parts.includes(include));
      assert.throws(() => matmulShader({ kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64 }, { ...c, precision }), /needs f16 weights/);
      assert.match(describeKernels({ ...c, precision }), new RegExp(`${precision} weights.*the f16 matrices: subgroup matrices`));
    }
  });
});

describe('matrix kernels on int8 and nf4 weights', function () {
  this.timeout(300_000);
  let gpu: GpuContext;
  before(async () => {
    gpu = await acquireGpu({ kernelPath: 'f32' });
  });
  after(() => gpu && releaseGpu(gpu));

  const variants: [MatmulVariant, number][] = [
    [{ kind: 'vec', tb: 4 }, 3],
    [{ kind: 'vec', tb: 8 }, 13],
    [{ kind: 'gemm', tile: 64 }, 70],
    [{ kind: 'gemm', tile: 16 }, 21],
  ];
  for (const format of ['int8', 'nf4'] as const) {
    for (const [v, rows] of variants) {
      const label = v.kind === 'vec' ? `streaming (${v.tb} tokens a pass)` : `tiled (${v.kind === 'gemm' ? v.tile : 0}-token tiles)`;
      it(`${format}, ${label}, ${rows} tokens: the product of the dequantised weights, every output written`, async () => {
        const { got, want, quantError } = await quantisedProduct(gpu, format, v, rows);
        let num = 0;
        let den = 0;
        for (let i = 0; i < want.length; i++) {
          assert.ok(Number.isFinite(got[i]), `output ${i} not written`);
          num += (got[i] - want[i]) ** 2;
          den += want[i] ** 2;
        }
        const err = Math.sqrt(num / den);
        assert.ok(err < 1e-6, `relative L2 error ${err} against the dequantised product`);
        // The scheme's own error, for scale: int8 ~5e-3, nf4 ~1e-1 on these uniform weights.
        assert.ok(quantError > 1e-4 && quantError < (format === 'int8' ? 2e-2 : 2e-1), `quantisation error ${quantError}`);
      });
    }
  }
});
