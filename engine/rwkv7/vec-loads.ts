// Weight loads a lane of the streaming product issues together (shaders/mm_vec.wgsl, mm_vec_blocks.wgsl LOADS).
// At batch 1 a 2048-row product runs 256 workgroups, a quarter of what the H200 holds at once, so its speed is
// the loads each lane keeps in flight: the WGSL read probe reached 0.77 TB/s from 264 workgroups with one load a
// trip and 4.3 TB/s with four (bench/RESULTS.md "Device facts"). `RWKV_MATMUL_VEC_LOADS=1|2|4|8` overrides the
// default (benchmarks compare), read once.

import { numberChoice } from '../env-choice';

export type VecLoads = 1 | 2 | 4 | 8;
const ALLOWED: VecLoads[] = [1, 2, 4, 8];

/** Loads a trip when nothing is set: two, the kernel's form before the count was a choice. */
export const DEFAULT_VEC_LOADS: VecLoads = 2;

/** The loads a trip of `value` (RWKV_MATMUL_VEC_LOADS), or the default when unset; other values are refused. */
export function vecLoadsFrom(value: string | undefined): VecLoads {
  return numberChoice('RWKV_MATMUL_VEC_LOADS', value, ALLOWED, DEFAULT_VEC_LOADS);
}

/** The loads a trip every streaming product runs with. */
export const VEC_LOADS: VecLoads = vecLoadsFrom(process.env.RWKV_MATMUL_VEC_LOADS);
