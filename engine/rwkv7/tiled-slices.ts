// K slices of the tiled subgroup-matrix product (shaders/mm_sgtile.wgsl SK): a workgroup of SK × SGM × SGN subgroups,
// each group of SGM × SGN owning the workgroup's result tiles over one slice of its K range, the slices' sums added in
// workgroup memory before the stores. Against splitting K across workgroups (mm_split.wgsl), no partial sums go
// through memory and no reduction pass follows; against a workgroup of one slice, SK times the subgroups work on the
// same tiles, which more warps on an SM can overlap. `RWKV_MATMUL_TILED_SK=1|2|4` (default 1) gives every tiled
// product that many slices where its workgroup stays within 256 invocations, read once (benchmarks compare); the K
// splits are then chosen for the same number of subgroups. Measured on an H100 (2026-12-05, bench/RESULTS.md
// "Nineteenth session"), it stays at 1: 2 slices everywhere took the 1.5B prefill of 512 tokens from 22,322 to 20,380
// tok/s. Slices did rescue the engine's 4×4 tiles in the probe (FFN value 110 µs in 2 slices × 2 splits against 192 in
// 4 splits), but the 4×2 tiles unsliced did better still in the engine.

import { numberChoice } from '../env-choice';

export type TiledSlices = 1 | 2 | 4;

/** The slices of `value` (RWKV_MATMUL_TILED_SK), 1 when unset; other values are refused. */
export function tiledSlicesFrom(value: string | undefined): TiledSlices {
  return numberChoice('RWKV_MATMUL_TILED_SK', value, [1, 2, 4] as const, 1);
}

/** The slices tiled products take when their tiling names none. */
export const TILED_SK: TiledSlices = tiledSlicesFrom(process.env.RWKV_MATMUL_TILED_SK);

/** Invocations a tiled workgroup may have (WebGPU's default maxComputeInvocationsPerWorkgroup). */
export const MAX_TILED_INVOCATIONS = 256;
