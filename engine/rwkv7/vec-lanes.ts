// Lanes per output row of the streaming product (shaders/mm_vec.wgsl LPR). 32 (one subgroup a row) runs by
// default: more lanes a row won the isolated products on the H200 (bench section matmul, one token: 8192×2048 50.6 →
// 18.1 µs with 128 lanes, 2048×8192 52.7 → 25.8 µs with 256), but not the engine's decode steps, where the rule
// "K / 16 lanes" was neutral at 1.5B and lost 10–13% at 0.1B b1 (bench/RESULTS.md "More lanes a row"): inside a
// step of 171 dependent dispatches the extra cross-subgroup sum costs what the extra loads in flight save.
// `RWKV_MATMUL_VEC_LANES=64|128|256` runs another count everywhere (benchmarks compare), read once.

import { numberChoice } from '../env-choice';

export type VecLanes = 32 | 64 | 128 | 256;
const LANES: VecLanes[] = [32, 64, 128, 256];

/** The lanes a row every streaming product runs with. */
export const VEC_LANES: VecLanes = numberChoice('RWKV_MATMUL_VEC_LANES', process.env.RWKV_MATMUL_VEC_LANES, LANES, 32);
