// f16 weights stored as 16×16 blocks (shaders/wlayout_blocks.wgsl): each strip of 16 output rows keeps its place,
// and inside it the 16×16 block of inputs 16·kb.. is 256 contiguous halves, 16 rows of 16. The subgroup-matrix
// products then load a whole weight tile with one contiguous 512-byte read instead of 16 rows K apart (on the H200
// probe the tiled product took 50 instead of 94 µs for 2048² at 512 tokens; bench/RESULTS.md "Tiled activations").
// Every kernel reads weights through the layout part of its group (wlayout_rows / wlayout_blocks), so the streaming,
// f32-tile and staged kernels run on either layout.

import { inPieces, YIELD_FLOATS } from '../yield-chunks';
import type { KernelPath } from '../gpu/capabilities';

/** How a matrix group's buffer orders its weights: the checkpoint's [out, in] rows, or 16×16 blocks. */
export type WeightLayout = 'rows' | 'blocks';

/** The layout part of the matrix kernels' shaders (shaders/wlayout_*.wgsl) for a layout. */
export function weightLayoutPart(layout: WeightLayout | undefined): string {
  return layout === 'blocks' ? 'wlayout_blocks' : 'wlayout_rows';
}

/**
 * Whether f16 matrix products are stored as blocks: by default on a 'subgroup-matrix' device, whose tiled products
 * gain from them; RWKV_WEIGHT_BLOCKS=off keeps rows there (benchmarks compare), =on stores blocks on any path (the
 * golden tests run the streaming and f32-tile kernels over blocks on devices without subgroup matrices). Read once
 * per model load; anything else is refused with the accepted values named.
 */
export function weightBlocksFor(kernelPath: KernelPath, env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.RWKV_WEIGHT_BLOCKS;
  if (v === undefined || v === '') return kernelPath === 'subgroup-matrix';
  if (v === 'on') return true;
  if (v === 'off') return false;
  throw new Error(`RWKV_WEIGHT_BLOCKS: '${v}' is not 'on' or 'off'`);
}

/** A matrix can be stored as blocks: its outputs and inputs whole multiples of 16. */
export function blockable(m: { n: number; k: number }): boolean {
  return m.n % 16 === 0 && m.k % 16 === 0;
}

/**
 * The [n, k] row-major halves `rows` as 16×16 blocks, written into `out` from `at` (a group buffer holds several
 * matrices). Works 16-row strips at a time, YIELD_FLOATS halves between two turns of the event loop: the 1.5B head
 * alone is 134 M halves.
 */
export async function writeBlocks(rows: Uint16Array, n: number, k: number, out: Uint16Array, at: number): Promise<void> {
  if (!blockable({ n, k })) throw new RangeError(`a ${n}×${k} matrix is not whole 16×16 blocks`);
  if (rows.length !== n * k) throw new RangeError(`${rows.length} halves are not a ${n}×${k} matrix`);
  if (at < 0 || at + n * k > out.length) throw new RangeError(`a ${n}×${k} matrix at ${at} overruns ${out.length} halves`);
  const strip = 16 * k;
  const stripsPerPiece = Math.max(1, Math.floor(YIELD_FLOATS / strip));
  await inPieces(n / 16, stripsPerPiece, (from, to) => {
    for (let s = from; s < to; s++) blockStrip(rows, s * strip, k, out, at + s * strip);
  });
}

/** One strip of 16 rows: row r's inputs 16·kb.. go to block kb's row r (as 32-bit pairs where both sides allow). */
function blockStrip(rows: Uint16Array, src: number, k: number, out: Uint16Array, dst: number): void {
  const blocks = k / 16;
  const words = (a: Uint16Array, at: number) => (a.byteOffset + at * 2) % 4 === 0;
  if (words(rows, src) && words(out, dst)) {
    // Offsets within a strip are multiples of 16 halves, so every piece stays 32-bit aligned.
    const from = new Uint32Array(rows.buffer, rows.byteOffset + src * 2, 8 * k);
    const to = new Uint32Array(out.buffer, out.byteOffset + dst * 2, 8 * k);
    const half = k / 2;
    for (let r = 0; r < 16; r++) {
      for (let kb = 0; kb < blocks; kb++) {
        const a = r * half + kb * 8;
        const b = kb * 128 + r * 8;
        for (let j = 0; j < 8; j++) to[b + j] = from[a + j];
      }
    }
    return;
  }
  for (let r = 0; r < 16; r++) {
    for (let kb = 0; kb < blocks; kb++) {
      const a = src + r * k + kb * 16;
      const b = dst + kb * 256 + r * 16;
      for (let j = 0; j < 16; j++) out[b + j] = rows[a + j];
    }
  }
}

/** Where weight (o, i) of an [n, k] matrix lies in its blocks (the layout wlayout_blocks.wgsl reads). */
export function blockIndex(o: number, i: number, k: number): number {
  return Math.floor(o / 16) * 16 * k + Math.floor(i / 16) * 256 + (o % 16) * 16 + (i % 16);
}
