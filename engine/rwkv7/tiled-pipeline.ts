// Software-pipelined trips of the tiled subgroup-matrix product (shaders/mm_sgtile.wgsl, engine/rwkv7/sgtile-code.ts):
// a trip's loads all come before its multiplies, but without pipelining nothing overlaps one trip's loads with the
// previous trip's multiplies, so each trip waits a full round trip to L2 with the tensor cores idle. Pipelined, the
// next trip's matrices are loaded into fresh registers before this trip's multiplies (twice the operand registers).
// `RWKV_MATMUL_TILED_PIPE=on|off` (default off) chooses it for every tiled product, read once (benchmarks compare).
// Measured on an H100 (2026-12-05, bench/RESULTS.md "Nineteenth session"), it stays off: in the GEMM probe no
// pipelined kernel beat the best kernel without it by more than the spread, the engine's 4×4 tiles with 4 steps a trip
// ran 2–3× slower (their doubled operands spill), and the engine's 1.5B prefill of 512 tokens fell from 22,322 to
// 15,476 tok/s with every tiling pipelined, from 23,300 to 22,293 with the 4×2 prefill tiles alone.

/** Whether `value` (RWKV_MATMUL_TILED_PIPE) turns pipelining on; unset is off, anything but on/off is refused. */
export function tiledPipeFrom(value: string | undefined): boolean {
  if (value === undefined || value === '' || value === 'off') return false;
  if (value === 'on') return true;
  throw new Error(`RWKV_MATMUL_TILED_PIPE=${value}: give on or off`);
}

/** Whether every tiled product runs pipelined trips. */
export const TILED_PIPE: boolean = tiledPipeFrom(process.env.RWKV_MATMUL_TILED_PIPE);
