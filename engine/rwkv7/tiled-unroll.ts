// Steps of 16 inputs the tiled subgroup-matrix product (shaders/mm_sgtile.wgsl KU) loads together before
// multiplying, for tiles that do not name their own (matmul.ts DEFAULT_TILED names 4). Each step's loads come straight from storage, so one step at a time pays a memory round trip per 16
// inputs: the K splits (matmul.ts chooseSplit) were the only way to shorten that chain. `RWKV_MATMUL_TILED_KU=1|2|4`
// overrides the default (benchmarks compare), read once.

import { numberChoice } from '../env-choice';

export type TiledUnroll = 1 | 2 | 4;
const ALLOWED: TiledUnroll[] = [1, 2, 4];

/** Steps a trip when nothing is set: one, the kernel's form before the count was a choice. */
export const DEFAULT_TILED_KU: TiledUnroll = 1;

/** The steps a trip of `value` (RWKV_MATMUL_TILED_KU), or the default when unset; other values are refused. */
export function tiledUnrollFrom(value: string | undefined): TiledUnroll {
  return numberChoice('RWKV_MATMUL_TILED_KU', value, ALLOWED, DEFAULT_TILED_KU);
}

/** The steps a trip every tiled product runs with. */
export const TILED_KU: TiledUnroll = tiledUnrollFrom(process.env.RWKV_MATMUL_TILED_KU);
