// f16 weights stored as 16×16 blocks (shaders/wlayout_blocks.wgsl): each strip of 16 output rows keeps its place,
// and inside it the 16×16 block of inputs 16·kb.. is 256 contiguous halves, 16 rows of 16. The subgroup-matrix
// products then load a whole weight tile with one contiguous 512-byte read instead of 16 rows K apart (on the H200
// probe the tiled product took 50 instead of 94 µs for 2048² at 512 tokens; bench/RESULTS.md "Tiled activations").
// Every kernel reads weights through the layout part of its group (wlayout_rows / wlayout_blocks), so the streaming,
// f32-tile and staged kernels run on either layout.

import { bindGroup, createBuffer, makeKernel } from '../gpu/kernel';
import type { KernelPath } from '../gpu/capabilities';

// GPUBufferUsage bits, spelled out so this file loads before Dawn's globals exist.
const STORAGE = 0x80;
const UNIFORM = 0x40;
const COPY_DST = 0x08;
const COPY_SRC = 0x04;

/**
 * How a matrix group's buffer orders its weights: the checkpoint's [out, in] rows; 16×16 blocks strip by strip (each
 * 16-row strip's blocks in input order); or 16×16 blocks input by input ('input-blocks': the blocks of inputs 16·kb..
 * of every strip side by side, then the next kb). In the H200 probe the second order ran the 2×2 tiles of batch-64
 * products faster (FFN value in 8 splits 61.3 → 44.0 µs, FFN key 42.6 → 34.1; bench/RESULTS.md "The SM clock
 * decides a figure", block order): concurrent workgroups then read neighbouring blocks. Not the default until the
 * engine shows it (RWKV_WEIGHT_BLOCKS=by-input).
 */
export type WeightLayout = 'rows' | 'blocks' | 'input-blocks';

/** The layout part of the matrix kernels' shaders (shaders/wlayout_*.wgsl) for a layout. */
export function weightLayoutPart(layout: WeightLayout | undefined): string {
  return layout === 'blocks' ? 'wlayout_blocks' : layout === 'input-blocks' ? 'wlayout_input_blocks' : 'wlayout_rows';
}

/** The two orders of blocks. */
export type BlockOrder = Exclude<WeightLayout, 'rows'>;

/** The weights are 16×16 blocks, in either order. */
export function inBlocks(layout: WeightLayout | undefined): layout is BlockOrder {
  return layout === 'blocks' || layout === 'input-blocks';
}

/**
 * How f16 matrix products are stored: as blocks by default on a 'subgroup-matrix' device, whose tiled products gain
 * from them, else as rows; RWKV_WEIGHT_BLOCKS=off keeps rows there (benchmarks compare), =on stores blocks on any
 * path (the golden tests run the streaming and f32-tile kernels over blocks on devices without subgroup matrices),
 * =by-input stores blocks input by input. Read once per model load; anything else is refused with the accepted
 * values named.
 */
export function weightLayoutFor(kernelPath: KernelPath, env: NodeJS.ProcessEnv = process.env): WeightLayout {
  const v = env.RWKV_WEIGHT_BLOCKS;
  if (v === undefined || v === '') return kernelPath === 'subgroup-matrix' ? 'blocks' : 'rows';
  if (v === 'on') return 'blocks';
  if (v === 'off') return 'rows';
  if (v === 'by-input') return 'input-blocks';
  throw new Error(`RWKV_WEIGHT_BLOCKS: '${v}' is not 'on', 'off' or 'by-input'`);
}

/** A matrix can be stored as blocks: its outputs and inputs whole multiples of 16. */
export function blockable(m: { n: number; k: number }): boolean {
  return m.n % 16 === 0 && m.k % 16 === 0;
}

/** A matrix to store as blocks: its f16 bits, row-major, and where it starts in its group (units of 8 weights). */
export interface BlockMatrix {
  data: Uint16Array;
  n: number;
  k: number;
  wOff: number;
}

/**
 * A group buffer of `halves` f16 weights holding `mats` as 16×16 blocks (the rest zeros): the rows are uploaded to a
 * scratch buffer and reordered on the device (shaders/rows_to_blocks.wgsl), so loading costs no host time per
 * weight; the scratch is released once the reordering is submitted. Shapes and ranges are checked first. A matrix of
 * more than `maxWorkgroupsX` workgroups of runs (a 7B head: 65,536) dispatches in two dimensions.
 * Null when the device runs out of memory: the reorder holds the group twice for a moment (its rows and its blocks),
 * so a model that only just fits gets this group as rows instead (uploadRwkv7), which a load needs once.
 */
export async function uploadBlocks(
  device: GPUDevice,
  label: string,
  mats: readonly BlockMatrix[],
  halves: number,
  order: BlockOrder = 'blocks',
  maxWorkgroupsX = 65535,
): Promise<GPUBuffer | null> {
  for (const m of mats) {
    if (!blockable(m)) throw new RangeError(`${label}: a ${m.n}×${m.k} matrix is not whole 16×16 blocks`);
    if (m.data.length !== m.n * m.k) throw new RangeError(`${label}: ${m.data.length} halves are not a ${m.n}×${m.k} matrix`);
    if (m.wOff < 0 || 8 * m.wOff + m.n * m.k > halves) throw new RangeError(`${label}: a ${m.n}×${m.k} matrix at ${8 * m.wOff} overruns ${halves} halves`);
  }
  const bytes = Math.ceil(halves / 8) * 16;
  // A reordering the device refuses must fail the load, not leave a buffer of zeros.
  device.pushErrorScope('validation');
  device.pushErrorScope('out-of-memory');
  const rows = createBuffer(device, `${label} (rows)`, bytes, STORAGE | COPY_DST);
  for (const m of mats) device.queue.writeBuffer(rows, 16 * m.wOff, m.data.buffer, m.data.byteOffset, m.data.byteLength);
  // COPY_SRC: the tests read the reordering back.
  const out = createBuffer(device, label, bytes, STORAGE | COPY_DST | COPY_SRC);
  const kernel = makeKernel(device, ['rows_to_blocks'], {}, ['uniform', 'read', 'rw']);
  const enc = device.createCommandEncoder({ label: `${label}: rows to blocks` });
  const uniforms: GPUBuffer[] = [];
  for (const m of mats) {
    const u = createBuffer(device, `${label} move`, 16, UNIFORM | COPY_DST);
    device.queue.writeBuffer(u, 0, new Uint32Array([m.wOff, m.n, m.k, order === 'input-blocks' ? 1 : 0]));
    uniforms.push(u);
    const pass = enc.beginComputePass();
    pass.setPipeline(kernel.pipeline);
    pass.setBindGroup(0, bindGroup(device, kernel, [u, rows, out]));
    const groups = Math.ceil((m.n * m.k) / 16 / 256);
    pass.dispatchWorkgroups(Math.min(groups, maxWorkgroupsX), Math.ceil(groups / maxWorkgroupsX));
    pass.end();
  }
  device.queue.submit([enc.finish()]);
  // Destroying after the submit frees the memory once the reordering has run.
  rows.destroy();
  for (const u of uniforms) u.destroy();
  const outOfMemory = await device.popErrorScope();
  const invalid = await device.popErrorScope();
  if (outOfMemory || invalid) out.destroy();
  // Out of memory, the calls after the failed allocation are invalid too: the caller falls back to rows.
  if (outOfMemory) return null;
  if (invalid) throw new Error(`${label}: reordering the weights into blocks failed on the device: ${invalid.message}`);
  return out;
}

/**
 * Where weight (o, i) of an [n, k] matrix `m` lies in its blocks: strip by strip (wlayout_blocks.wgsl), or input by
 * input (wlayout_input_blocks.wgsl).
 */
export function blockIndex(o: number, i: number, m: { n: number; k: number }, order: BlockOrder = 'blocks'): number {
  const inBlock = (o % 16) * 16 + (i % 16);
  if (order === 'input-blocks') return (Math.floor(i / 16) * (m.n / 16) + Math.floor(o / 16)) * 256 + inBlock;
  return Math.floor(o / 16) * 16 * m.k + Math.floor(i / 16) * 256 + inBlock;
}
