// One grouped matrix product run on the device as the engine runs it (matmul.ts: uniform, shader, dispatch), for
// the kernel tests: two matrices, the first with tanh, the second accumulating into y; the outputs of the first are
// poisoned with NaN first so every one must be written. Returns y and its float64 reference from the weights the
// kernel should see.

import { bindGroup, createBuffer, makeKernel } from '../engine/gpu/kernel';
import type { GpuContext } from '../engine/gpu/device';
import {
  groupUniform, matmulDispatch, matmulShader, reducesAfter, splitReduceDispatch, splitReduceShader, splitScratchFloats, tiledInputHalves,
  tileInputDispatch, tileInputShader, tileTokensOf, type MatmulVariant, type SegmentIO,
} from '../engine/rwkv7/matmul';
import type { MatrixGroup } from '../engine/rwkv7/weights';
import { blockIndex } from '../engine/rwkv7/weight-blocks';
import { f16BitsToF32, f32ToF16 } from '../engine/loader/dtype';

/** Deterministic values in [-1, 1) times `scale`. */
export function values(count: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0 || 1;
  return Float32Array.from({ length: count }, () => (((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 31) - 1) * scale);
}

export async function readBuffer(device: GPUDevice, buf: GPUBuffer, bytes: number): Promise<Float32Array> {
  const rb = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(buf, 0, rb, 0, bytes);
  device.queue.submit([enc.finish()]);
  await rb.mapAsync(GPUMapMode.READ);
  const out = new Float32Array(rb.getMappedRange().slice(0));
  rb.destroy();
  return out;
}

export interface GroupedProductCase {
  variant: MatmulVariant;
  rows: number;
  /** The group's buffer content, as the uploader writes it. */
  words: ArrayBufferView;
  /** The group without its buffer (segments, format, scale offset). */
  group: Omit<MatrixGroup, 'buffer'>;
  /** Per matrix [n, k] and the weight values the kernel should see, row-major. */
  mats: { n: number; k: number; weights: ArrayLike<number> }[];
}

export async function runGroupedProduct(
  gpu: GpuContext,
  c: GroupedProductCase,
): Promise<{ got: Float32Array; want: Float64Array; xs: Float32Array[] }> {
  const { device } = gpu;
  const { variant: v, rows, mats } = c;
  const xs = mats.map((m, i) => values(rows * m.k, 7 + i));
  const yAcc = values(rows * mats[1].n, 11);
  const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  const wBuf = createBuffer(device, 'W', c.words.byteLength, S);
  device.queue.writeBuffer(wBuf, 0, c.words.buffer, c.words.byteOffset, c.words.byteLength);
  const xBuf = createBuffer(device, 'x', (xs[0].length + xs[1].length) * 4, S);
  device.queue.writeBuffer(xBuf, 0, xs[0]);
  device.queue.writeBuffer(xBuf, xs[0].length * 4, xs[1]);
  const y0 = rows * mats[0].n;
  const yLen = y0 + yAcc.length;
  const yBuf = createBuffer(device, 'y', yLen * 4, S);
  device.queue.writeBuffer(yBuf, 0, new Float32Array(y0).fill(NaN)); // every output must be written
  device.queue.writeBuffer(yBuf, y0 * 4, yAcc);
  const batch = createBuffer(device, 'batch', 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
  device.queue.writeBuffer(batch, 0, new Uint32Array([rows, 1, rows, 0]));
  const io: SegmentIO[] = [
    { xOff: 0, yOff: 0, act: 1 },
    { xOff: xs[0].length, yOff: y0, accum: true },
  ];
  const u = groupUniform('test', { ...c.group, buffer: wBuf }, io, false);
  const uBuf = createBuffer(device, 'u', u.words.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
  device.queue.writeBuffer(uBuf, 0, u.words);
  const config = { kernelPath: gpu.kernelPath, precision: c.group.format, subgroup32: gpu.subgroup32, layout: c.group.layout };
  const shader = matmulShader(v, config);
  const kernel = makeKernel(device, shader.parts, shader.constants, shader.bindings);
  // A split-K product: partial sums poisoned too, so a split that writes nothing shows.
  const partFloats = splitScratchFloats(v, u.virtualRows, rows);
  const partBuf = partFloats > 0 ? createBuffer(device, 'parts', partFloats * 4, S) : null;
  if (partBuf) device.queue.writeBuffer(partBuf, 0, new Float32Array(partFloats).fill(NaN));
  // A tiled product (mm_sgtile) reads its inputs as f16 blocks that its tiling pass writes first (binding 6).
  const tiled = v.kind === 'sgtile';
  const ks = mats.map((m) => m.k);
  const tiledBuf = tiled ? createBuffer(device, 'tiled', Math.ceil((tiledInputHalves(ks, rows, tileTokensOf(v)) * 2) / 16) * 16, S) : null;
  const resources = [batch, wBuf, xBuf, yBuf, uBuf, ...(partBuf ? [partBuf] : []), ...(tiledBuf ? [tiledBuf] : [])];
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  if (tiled) {
    const t = tileInputShader(tileTokensOf(v));
    const tk = makeKernel(device, t.parts, t.constants, t.bindings);
    pass.setPipeline(tk.pipeline);
    pass.setBindGroup(0, bindGroup(device, tk, resources));
    pass.dispatchWorkgroups(...tileInputDispatch(ks, rows, tileTokensOf(v)));
  }
  pass.setPipeline(kernel.pipeline);
  pass.setBindGroup(0, bindGroup(device, kernel, resources));
  pass.dispatchWorkgroups(...matmulDispatch(v, u.virtualRows, rows));
  if (reducesAfter(v)) {
    const reduce = splitReduceShader(v, config, rows);
    const rk = makeKernel(device, reduce.parts, reduce.constants, reduce.bindings);
    pass.setPipeline(rk.pipeline);
    pass.setBindGroup(0, bindGroup(device, rk, resources));
    pass.dispatchWorkgroups(...splitReduceDispatch(u.virtualRows, rows));
  }
  pass.end();
  device.queue.submit([enc.finish()]);
  const got = await readBuffer(device, yBuf, yLen * 4);
  const want = new Float64Array(yLen);
  mats.forEach((m, s) => {
    for (let t = 0; t < rows; t++) {
      for (let o = 0; o < m.n; o++) {
        let acc = 0;
        for (let k = 0; k < m.k; k++) acc += m.weights[o * m.k + k] * xs[s][t * m.k + k];
        if (s === 0) want[t * m.n + o] = Math.tanh(acc);
        else want[y0 + t * m.n + o] = acc + yAcc[t * m.n + o];
      }
    }
  });
  for (const b of [wBuf, xBuf, yBuf, batch, uBuf, partBuf, tiledBuf]) b?.destroy();
  return { got, want, xs };
}

/**
 * Runs one grouped product on the device: two f16 matrices (40×64 with tanh, 96×32 accumulating into y; wide:
 * 40×4352 and 96×1056; over blocks the first has 48 rows) over `rows` tokens; returns y and the float64 reference.
 */
export async function f16GroupedProduct(gpu: GpuContext, v: MatmulVariant, rows: number, wide = false, blocks = false): Promise<{ got: Float32Array; want: Float64Array }> {
  // wide: K long enough for the two-chunk loop of 256 lanes a row (stride 2,048), with a remainder; and for
  // several full trips of 8 loads over blocks (128 blocks a trip) with a remainder. Blocks need whole 16×16 blocks.
  const mats = [
    { n: blocks ? 48 : 40, k: wide ? 4352 : 64 },
    { n: 96, k: wide ? 1056 : 32 },
  ];
  const bits = mats.map((m, i) => f32ToF16(values(m.n * m.k, 3 + i)));
  const wAll = new Uint16Array(bits.reduce((a, b) => a + b.length, 0));
  let at = 0;
  for (const [i, m] of mats.entries()) {
    if (blocks) for (let o = 0; o < m.n; o++) for (let k = 0; k < m.k; k++) wAll[at + blockIndex(o, k, m)] = bits[i][o * m.k + k];
    else wAll.set(bits[i], at);
    at += bits[i].length;
  }
  const group = {
    segs: [{ name: 'a', ...mats[0], wOff: 0 }, { name: 'b', ...mats[1], wOff: bits[0].length / 8 }],
    format: 'f16' as const,
    ...(blocks ? { layout: 'blocks' as const } : {}),
  };
  return runGroupedProduct(gpu, {
    variant: v,
    rows,
    words: wAll,
    group,
    mats: mats.map((m, s) => ({ ...m, weights: Array.from(bits[s], f16BitsToF32) })),
  });
}

/** Relative L2 distance of `got` from `want`, after asserting every output was written (finite). */
export function writtenRelL2(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    if (!Number.isFinite(got[i])) throw new Error(`output ${i} not written (${got[i]})`);
    num += (got[i] - want[i]) ** 2;
    den += want[i] ** 2;
  }
  return Math.sqrt(num / den);
}
