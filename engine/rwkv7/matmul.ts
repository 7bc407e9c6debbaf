// The grouped matrix products y_s = act_s(W_s x_s) (+ y_s) of the forward pass: which kernel runs for how many
// rows on which kernel path, how its shader is put together, the uniform describing a group, and the dispatch
// size. The runtime and the kernel microbenchmark (bench/matmul.ts) both build their products here.
//
// Kernels (shaders/):
//   mm_vec    streaming: 8 output rows per workgroup, weights read once per TB (4 or 8) tokens — decode;
//             mm_vec_blocks the same over weights stored as 16×16 blocks, its loads rearranged to stay contiguous.
//   mm_gemm   tiled f32 arithmetic, 64 (or 16) tokens × 64 outputs per workgroup — prefill on 'f16'/'f32'.
//   mm_sgmat  subgroup matrices, f16 × f16 → f32, BM tokens × BN outputs per workgroup — 'subgroup-matrix'.
//   mm_sgstage  the same arithmetic with both operands staged in workgroup memory — 'subgroup-matrix' int8.
//   mm_sgtile  the same arithmetic loading both operands straight from storage, the activations first written as
//             f16 16×16 blocks by mm_sgtile_x — 'subgroup-matrix' f16 from 64 rows (batched decode, prefill).
// mm_gemm and mm_sgmat may split K over `split` workgroups (mm_split.wgsl) whose partial sums a second small
// dispatch adds (mm_split_reduce.wgsl): on unless RWKV_MATMUL_SPLIT_K=0 (splitKFromEnv).
// Each reads its weights through a prelude chosen by the group's storage format (shaders/weights_*.wgsl): f16,
// f32, int8 (row scales applied once per output) or nf4; mm_vec and mm_gemm run every format, mm_sgmat f16 only.
// Where a weight lies comes from the group's layout part (shaders/wlayout_*.wgsl): the checkpoint's rows, or
// 16×16 blocks (weight-blocks.ts), which every kernel reads.

import { numberChoice } from '../env-choice';
import type { KernelPath } from '../gpu/capabilities';
import type { BindingKind } from '../gpu/kernel';
import type { MatrixGroup, WeightPrecision } from './weights';
import { VEC_LANES, type VecLanes } from './vec-lanes';
import { VEC_LOADS, type VecLoads } from './vec-loads';
import { TILED_KU } from './tiled-unroll';
import { TILED_PIPE } from './tiled-pipeline';
import { MAX_TILED_INVOCATIONS, TILED_SK } from './tiled-slices';
import { stagedRowsCode, tiledProductCode } from './sgtile-code';
import type { ShaderConstant } from '../gpu/shader-source';
import { inBlocks, weightLayoutPart, type BlockOrder, type WeightLayout } from './weight-blocks';

export type MatmulVariant =
  /** lpr: lanes per output row (vec-lanes.ts), 32 when absent; loads: a lane's loads a trip (vec-loads.ts), VEC_LOADS when absent. */
  | { kind: 'vec'; tb: 4 | 8; lpr?: VecLanes; loads?: VecLoads }
  /** split: K over this many workgroups (64-token tiles only), 1 or absent for none. */
  | { kind: 'gemm'; tile: 16 | 64; split?: number }
  /** mt×nt result tiles of 16×16 per subgroup, sgs subgroups side by side along the outputs, kc inputs a stage. */
  | { kind: 'sgmat'; mt: 1 | 2 | 4; nt: 1 | 2 | 4; sgs: 1 | 2 | 4; kc: 32 | 64; split?: number }
  /**
   * Subgroup matrices with weights and activations staged in workgroup memory (mm_sgstage): sgm × sgn subgroups,
   * each mt × nt result tiles of 16×16; 16·nt·sgn outputs (at most SEGMENT_ALIGN) × 16·mt·sgm tokens a workgroup.
   */
  | { kind: 'sgstage'; mt: 1 | 2 | 4; nt: 1 | 2 | 4; sgm: 1 | 2 | 4; sgn: 1 | 2 | 4; kc: 32 | 64; split?: number }
  /**
   * Subgroup matrices loaded straight from storage (mm_sgtile), the activations tiled first (mm_sgtile_x): sgm × sgn
   * subgroups of mt × nt result tiles; 16·nt·sgn outputs (at most SEGMENT_ALIGN) × 16·mt·sgm tokens (at most
   * TILE_TOKENS) a workgroup; ku steps of 16 inputs loaded together (TILED_KU when absent), pipe: trips software-
   * pipelined (TILED_PIPE when absent, tiled-pipeline.ts); sk slices of K in a workgroup (tiledSlicesOf,
   * tiled-slices.ts). blocksOut (unsplit only): its results go out as the next product's f16 blocks (binding 7,
   * sgtile_blocks_out.wgsl) instead of f32 rows.
   */
  | { kind: 'sgtile'; mt: 1 | 2 | 4; nt: 1 | 2 | 4; sgm: 1 | 2 | 4; sgn: 1 | 2 | 4; ku?: 1 | 2 | 4; pipe?: boolean; sk?: 1 | 2 | 4; split?: number; blocksOut?: boolean };

/** Most K splits a product takes (mm_split.wgsl); their partial sums are SPLIT × tokens × outputs floats. */
export const MAX_SPLIT = 8;
/**
 * Workgroups a split product aims for, and the most inputs one split walks. Measured on the H200 (bench section
 * `matmul`, bench/RESULTS.md "Split-K"): a workgroup walking all of K = 8192 alone was the batched-decode bottleneck
 * (1.5B FFN value at 64 tokens 350 µs unsplit, 129 µs in 8 splits; at 512 tokens 1,837 against 739 µs), and
 * products with few workgroups gain from splitting even at K = 2048 (2048² at 16 tokens: 70 → 14 µs).
 */
const SPLIT_TARGET_WORKGROUPS = 1024;
const SPLIT_MAX_K = 1024;
/**
 * Result tiles of 16 tokens per subgroup of the split subgroup-matrix product, at most (16·mt tokens a
 * workgroup, each weight read once per 16·mt tokens). 1: with splits, 2 and 4 won only a few shapes on the H200
 * (bench section `matmul`, before the kernel loaded a stage's weights first), and lost where the splits already
 * gave enough workgroups. `RWKV_MATMUL_SGMAT_MT=1|2|4` overrides it (benchmarks compare), read once.
 */
export function splitSgmatMtFrom(value: string | undefined): 1 | 2 | 4 {
  return numberChoice('RWKV_MATMUL_SGMAT_MT', value, [1, 2, 4] as const, 1);
}
const SPLIT_SGMAT_MT = splitSgmatMtFrom(process.env.RWKV_MATMUL_SGMAT_MT);
/** Fewest inputs one split sums. */
const SPLIT_MIN_K = 256;
/**
 * Rows up to which the streaming kernel runs where split subgroup-matrix products exist: from 8 tokens the split
 * tiles won on the H200 (2048² at 8 tokens 13.4 µs against 17.1; at 16 tokens, FFN shapes 43 against 442 µs).
 */
export const SPLIT_SGMAT_VEC_ROWS = 4;
/**
 * ... except for small matrices, which stream up to this many rows as before: the 0.1B shape's products (768 wide,
 * under SMALL_PRODUCT_WEIGHTS weights) lost at batch 8 and 32 on split tiles (H200, 2026-12-03 run 3).
 * `RWKV_MATMUL_SMALL_VEC_ROWS=16|32|64|128` overrides it (benchmarks compare), read once.
 */
export function smallProductVecRowsFrom(value: string | undefined): 16 | 32 | 64 | 128 {
  return numberChoice('RWKV_MATMUL_SMALL_VEC_ROWS', value, [16, 32, 64, 128] as const, 32);
}
const SMALL_PRODUCT_VEC_ROWS = smallProductVecRowsFrom(process.env.RWKV_MATMUL_SMALL_VEC_ROWS);
const SMALL_PRODUCT_WEIGHTS = 3 << 20;
/** Staged subgroup-matrix tiles (mm_sgstage) and the fewest rows they run for. */
export interface StagedChoice {
  variant: Extract<MatmulVariant, { kind: 'sgstage' }>;
  minRows: number;
}

/**
 * Which staged tiles a runtime uses: one for products of SMALL_PRODUCT_WEIGHTS or more with K of at least
 * STAGED_LARGE_MIN_K, one for the others. At 64 rows a short K loses to split mm_sgmat: the 0.1B and 0.4B heads
 * (K = 768, 1024) on the large tiles cost 12% and 5% of batch-64 decode (H200, 2026-12-03 run 3 of the fourth session).
 */
export interface StagedTiles {
  large: StagedChoice;
  small: StagedChoice;
}

/**
 * Measured on the H200 (bench section `matmul`, bench/RESULTS.md "Staged subgroup-matrix tiles"): 2×2 tiles in
 * 2×2 subgroups, 64 inputs a stage, were within 6% of the best variant on every 1.5B product from 64 tokens
 * (2048×8192 at 512 tokens: 568 µs against 1,162 for split mm_sgmat) and had no bad shape, where 1×2 tiles in
 * 4×2 subgroups took twice as long on 8192×2048 at 512 tokens. The 0.1B shape's products are best on 1×2 tiles
 * with 32-input stages from 128 tokens (768×768 at 512: 30.8 against 37.1 µs) and lose to split mm_sgmat at 64.
 */
const STAGED_LARGE_MIN_K = 2048;

export const DEFAULT_STAGED: StagedTiles = {
  large: { variant: { kind: 'sgstage', mt: 2, nt: 2, sgm: 2, sgn: 2, kc: 64 }, minRows: 64 },
  small: { variant: { kind: 'sgstage', mt: 1, nt: 2, sgm: 4, sgn: 2, kc: 32 }, minRows: 128 },
};

/**
 * Staged tiles from RWKV_MATMUL_STAGED: unset for DEFAULT_STAGED, 'off' for none (split mm_sgmat throughout), or
 * 'MTxNTxSGMxSGNkKC@ROWS' for one variant for every product from ROWS rows (benchmarks), e.g. '2x2x2x2k64@64'.
 */
export function stagedFromEnv(env: NodeJS.ProcessEnv = process.env): StagedTiles | null {
  const spec = env.RWKV_MATMUL_STAGED;
  if (spec === undefined || spec === '') return DEFAULT_STAGED;
  if (spec === 'off') return null;
  const m = /^([124])x([124])x([124])x([124])k(32|64)@(\d+)$/.exec(spec);
  if (!m) throw new Error(`RWKV_MATMUL_STAGED: '${spec}' is not 'off' or MTxNTxSGMxSGNkKC@ROWS (MT, NT, SGM, SGN each 1, 2 or 4; KC 32 or 64)`);
  const [mt, nt, sgm, sgn] = [1, 2, 3, 4].map((i) => Number(m[i]) as 1 | 2 | 4);
  if (16 * nt * sgn > SEGMENT_ALIGN) throw new Error(`RWKV_MATMUL_STAGED: ${16 * nt * sgn} outputs a workgroup exceed ${SEGMENT_ALIGN}`);
  const one: StagedChoice = { variant: { kind: 'sgstage', mt, nt, sgm, sgn, kc: Number(m[5]) as 32 | 64 }, minRows: Number(m[6]) };
  return { large: one, small: one };
}

/** Bytes of workgroup memory a staged tile declares (shaders/mm_sgstage.wgsl: xs and ws in f16, rows of KC + 8; ot in f32). */
export function stagedWorkgroupBytes(v: Pick<StagedChoice['variant'], 'mt' | 'nt' | 'sgm' | 'sgn' | 'kc'>): number {
  return 2 * 16 * (v.mt * v.sgm + v.nt * v.sgn) * (v.kc + 8) + 4 * 256 * v.sgm * v.sgn;
}

/**
 * The staged tiles a device with `maxBytes` of workgroup memory (maxComputeWorkgroupStorageSize) can run: all of
 * them, the one that fits standing in for the other, or null (then f16 products take split mm_sgmat and int8 ones the
 * f32 tiles). The int8 tiles need 18,432 bytes and the large f16 ones 22,528, above WebGPU's default limit of 16,384:
 * on such a device their pipelines were invalid and the engine's first step failed (Dawn's null backend showed it).
 */
export function stagedWithin(staged: StagedTiles | null, maxBytes: number): StagedTiles | null {
  if (!staged) return null;
  const fits = (c: StagedChoice) => stagedWorkgroupBytes(c.variant) <= maxBytes;
  if (fits(staged.large) && fits(staged.small)) return staged;
  const one = [staged.small, staged.large].find(fits);
  return one ? { large: one, small: one } : null;
}

/**
 * Tokens the tiled activations are padded to (sgtile_layout.wgsl TILE_TOKENS), the most a tiled workgroup covers:
 * 64, or WIDE_TILE for a tiling of more tokens a workgroup (tileTokensOf).
 */
export const TILE_TOKENS = 64;
/**
 * The widest workgroup tile a tiled product takes from RWKV_MATMUL_TILED, in tokens and in outputs (none by default).
 * A 64 × 64 tile reads both operands once per 64 outputs or tokens (1/32 byte a FLOP), which may bound the prefill
 * products by L2 (bench/device/wide-tiles.sh measures it in the probe); 128 × 128 halves those reads. Outputs past 64
 * a workgroup run only where every segment of the group is whole such tiles (ProductShape.wideOutputs), as a tile
 * must not straddle two segments, which start SEGMENT_ALIGN apart.
 */
export const WIDE_TILE = 128;

/** Tokens the tiled inputs of a product on `v` are padded to. */
export function tileTokensOf(v: Pick<Extract<MatmulVariant, { kind: 'sgtile' }>, 'mt' | 'sgm'>): number {
  return 16 * v.mt * v.sgm > TILE_TOKENS ? WIDE_TILE : TILE_TOKENS;
}

/** Outputs a workgroup of `v` covers. */
function tileOutputs(v: Pick<Extract<MatmulVariant, { kind: 'sgtile' }>, 'nt' | 'sgn'>): number {
  return 16 * v.nt * v.sgn;
}

/**
 * K slices a workgroup of `v` runs: its own sk, else TILED_SK, lowered until the workgroup has at most
 * MAX_TILED_INVOCATIONS invocations.
 */
export function tiledSlicesOf(v: Pick<Extract<MatmulVariant, { kind: 'sgtile' }>, 'sgm' | 'sgn' | 'sk'>): 1 | 2 | 4 {
  let sk = v.sk ?? TILED_SK;
  while (sk > 1 && 32 * v.sgm * v.sgn * sk > MAX_TILED_INVOCATIONS) sk = (sk / 2) as 1 | 2;
  return sk;
}

/** The most tokens any tiling of `c` pads to. */
export function maxTileTokens(c: TiledChoice): number {
  return Math.max(...[c.large, c.medium, c.base].map(tileTokensOf));
}

/**
 * The tiled product's tiles: `large` and `medium` for the compute-bound products of prefill chunks (from
 * `largeRows` rows, by their output tiles and K: tiledFor), `base` for the rest; none below `minRows`.
 */
export interface TiledChoice {
  large: Extract<MatmulVariant, { kind: 'sgtile' }>;
  medium: Extract<MatmulVariant, { kind: 'sgtile' }>;
  base: Extract<MatmulVariant, { kind: 'sgtile' }>;
  minRows: number;
  largeRows: number;
  /** Output tiles from which a product of K ≥ LARGE_MIN_K takes the large tiles (unset: LARGE_TILES). */
  largeTiles?: number;
}

/**
 * Measured on the H200 (2026-12-04, bench/RESULTS.md "Flat tiles"): in the engine's 1.5B prefill of 512 tokens
 * (kernel profile, µs a step over 24 layers), one subgroup of 4×4 tiles with 4 steps of 16 inputs a trip took the
 * FFN key (8192 outputs) in 3,303 against 4,684 for 2×2 tiles in 2×2 subgroups, and the FFN value (K 8192) in 3,200
 * against 4,087; 4×2 tiles in two subgroups took the output product (2048², 256 tiles) in 1,490 against 2,086. The
 * 4×4 tiles lost on the r/k/v group (768 tiles: 3,620 against 2,492) and the LoRA products, and both lost at 64
 * rows (batched decode: FFN value 1,410 against 1,280), so those keep the 2×2 tiles. From 64 rows; fewer stay on
 * split mm_sgmat (a 64-token tile would be mostly padding).
 */
export const DEFAULT_TILED: TiledChoice = {
  // 4×2 tiles in two subgroups since the nineteenth session: in the GEMM probe on an H100 (same driver) the engine's
  // own 4×4 kernel ran the FFN products about twice as slow as the probe's 4×4 kernel (FFN value in 4 splits 192
  // against 94 µs, FFN key in 2 splits 223 against 111), its 4×2 kernel as fast as the probe's (120 and 117 µs); in
  // the engine, 1.5B prefill of 512 tokens 23,300 / 23,207 tok/s against 21,280 / 22,378 with 4×4, processes
  // alternating on one machine (bench/RESULTS.md "Nineteenth session").
  large: { kind: 'sgtile', mt: 4, nt: 2, sgm: 1, sgn: 2, ku: 4 },
  medium: { kind: 'sgtile', mt: 4, nt: 2, sgm: 1, sgn: 2, ku: 4 },
  // No ku: RWKV_MATMUL_TILED_KU (tiled-unroll.ts, default 1) sets it.
  base: { kind: 'sgtile', mt: 2, nt: 2, sgm: 2, sgn: 2 },
  minRows: 64,
  largeRows: 256,
};

/**
 * Output tiles (64 × 64) from which a product of largeRows rows or more and K ≥ LARGE_MIN_K takes the large tiles
 * (TiledChoice.largeTiles, RWKV_MATMUL_TILED_LARGE_TILES, replaces it).
 */
const LARGE_TILES = 1024;
/** Below this K (the LoRA up-projections: K = rank) the large tiles have too few steps to pay. */
const LARGE_MIN_K = 1024;
/** Inputs from which a product of at least LARGE_K_TILES tiles takes the large tiles (the FFN value). */
const LARGE_K = 4096;
/**
 * Fewer tiles than this would need 8 splits to fill the GPU: the 0.4B FFN value (K 4096, 128 tiles at 512 rows)
 * keeps the base tiles, not measured on the large ones alone.
 */
const LARGE_K_TILES = 256;

/**
 * The tiles of `c` for a product of `shape` over `rows` rows (at least c.minRows). Tiles wider than 64 outputs would
 * straddle two segments of a group not made of whole wide tiles: such a group takes the default base tiles.
 */
export function tiledFor(c: TiledChoice, shape: Pick<ProductShape, 'k' | 'virtualRows' | 'wideOutputs'>, rows: number): Extract<MatmulVariant, { kind: 'sgtile' }> {
  const tiles = tilesFor(c, shape, rows);
  return tileOutputs(tiles) > SEGMENT_ALIGN && !shape.wideOutputs ? DEFAULT_TILED.base : tiles;
}

function tilesFor(c: TiledChoice, shape: Pick<ProductShape, 'k' | 'virtualRows'>, rows: number): Extract<MatmulVariant, { kind: 'sgtile' }> {
  if (rows < c.largeRows) return c.base;
  const tiles = Math.ceil(shape.virtualRows / 64) * Math.ceil(rows / 64);
  if ((tiles >= (c.largeTiles ?? LARGE_TILES) && shape.k >= LARGE_MIN_K) || (shape.k >= LARGE_K && tiles >= LARGE_K_TILES)) return c.large;
  // One matrix of 2048² at 512 rows is 256 tiles; the r/k/v group (three matrices, 768 tiles) and the LoRA
  // down-projections (a few hundred outputs) keep the base tiles.
  return tiles >= 256 && tiles < 512 && shape.k >= 2048 ? c.medium : c.base;
}

/** The form of a tiling spec, for the messages that refuse one. */
const TILING_FORM = 'MTxNTxSGMxSGN[uKU][p][qSK]';
const TILING_FORM_NOTE = '(each 1, 2 or 4; p: pipelined trips, SK: K slices a workgroup)';

/**
 * One tiling from `spec` ('MTxNTxSGMxSGN[uKU][p][qSK]', each 1, 2 or 4; p: pipelined trips, qSK: SK slices of K a
 * workgroup), or null when it is not of that form; refused naming `name` when past the workgroup limits.
 */
function tilingFrom(name: string, spec: string): Extract<MatmulVariant, { kind: 'sgtile' }> | null {
  const m = /^([124])x([124])x([124])x([124])(?:u([124]))?(p)?(?:q([124]))?$/.exec(spec);
  if (!m) return null;
  const [mt, nt, sgm, sgn] = [1, 2, 3, 4].map((i) => Number(m[i]) as 1 | 2 | 4);
  if (16 * nt * sgn > WIDE_TILE) throw new Error(`${name}: ${16 * nt * sgn} outputs a workgroup exceed ${WIDE_TILE}`);
  if (16 * mt * sgm > WIDE_TILE) throw new Error(`${name}: ${16 * mt * sgm} tokens a workgroup exceed ${WIDE_TILE}`);
  const sk = m[7] ? (Number(m[7]) as 1 | 2 | 4) : undefined;
  if (sk && 32 * sgm * sgn * sk > MAX_TILED_INVOCATIONS) throw new Error(`${name}: ${sgm * sgn * sk} subgroups a workgroup exceed ${MAX_TILED_INVOCATIONS / 32}`);
  return { kind: 'sgtile' as const, mt, nt, sgm, sgn, ...(m[5] ? { ku: Number(m[5]) as 1 | 2 | 4 } : {}), ...(m[6] ? { pipe: true } : {}), ...(sk ? { sk } : {}) };
}

/**
 * Tiled products from RWKV_MATMUL_TILED: unset for DEFAULT_TILED, 'off' for none (the staged tiles), or
 * 'MTxNTxSGMxSGN[uKU][p][qSK]@ROWS' for one tiling of every product from ROWS rows (p: pipelined trips, qSK: SK
 * slices of K a workgroup). Unset, RWKV_MATMUL_TILED_LARGE and RWKV_MATMUL_TILED_MEDIUM ('MTxNTxSGMxSGN[uKU][p][qSK]')
 * replace only the default's large or medium tiles (the prefill products), for A/B runs.
 */
export function tiledFromEnv(env: NodeJS.ProcessEnv = process.env): TiledChoice | null {
  const spec = env.RWKV_MATMUL_TILED;
  if (spec === undefined || spec === '') {
    // One of the default's prefill tilings replaced, when its variable is set.
    const replaced = (name: 'RWKV_MATMUL_TILED_LARGE' | 'RWKV_MATMUL_TILED_MEDIUM') => {
      const value = env[name];
      if (!value) return null;
      const tiling = tilingFrom(name, value);
      if (!tiling) throw new Error(`${name}: '${value}' is not ${TILING_FORM} ${TILING_FORM_NOTE}`);
      return tiling;
    };
    const large = replaced('RWKV_MATMUL_TILED_LARGE');
    const medium = replaced('RWKV_MATMUL_TILED_MEDIUM');
    // From how many output tiles the large tiles start (A/B runs: 512 gives them the 1.5B r/k/v group's 768).
    const from = env.RWKV_MATMUL_TILED_LARGE_TILES;
    if (from !== undefined && from !== '' && !/^[1-9]\d{0,6}$/.test(from)) {
      throw new Error(`RWKV_MATMUL_TILED_LARGE_TILES: '${from}' is not a whole number of output tiles`);
    }
    const largeTiles = from ? { largeTiles: Number(from) } : {};
    return large || medium || from ? { ...DEFAULT_TILED, ...(large ? { large } : {}), ...(medium ? { medium } : {}), ...largeTiles } : DEFAULT_TILED;
  }
  if (spec === 'off') return null;
  const m = /^(.*)@(\d+)$/.exec(spec);
  const variant = m ? tilingFrom('RWKV_MATMUL_TILED', m[1]) : null;
  if (!m || !variant) throw new Error(`RWKV_MATMUL_TILED: '${spec}' is not 'off' or ${TILING_FORM}@ROWS ${TILING_FORM_NOTE}`);
  const minRows = Number(m[2]);
  return { large: variant, medium: variant, base: variant, minRows, largeRows: minRows };
}

/** f16 halves of a group's tiled inputs at `rows` rows (mm_sgtile_x.wgsl): every segment's padded rows × K. */
export function tiledInputHalves(ks: readonly number[], rows: number, tileTokens = TILE_TOKENS): number {
  const padded = Math.ceil(rows / tileTokens) * tileTokens;
  return ks.reduce((sum, k) => sum + padded * k, 0);
}

/** Workgroups of the input-tiling pass (mm_sgtile_x.wgsl): 256 invocations of 8 inputs each. */
export function tileInputDispatch(ks: readonly number[], rows: number, tileTokens = TILE_TOKENS): [number, number] {
  const groups = Math.ceil(tiledInputHalves(ks, rows, tileTokens) / 8 / 256);
  return groups <= 65535 ? [Math.max(1, groups), 1] : [65535, Math.ceil(groups / 65535)];
}

/** Split-K products are on unless RWKV_MATMUL_SPLIT_K=0 (the single-pass kernels, as measured before them). */
export function splitKFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.RWKV_MATMUL_SPLIT_K !== '0';
}

/** Where one matrix of a group reads and writes (float offsets into the bound buffers). */
export interface SegmentIO {
  xOff: number;
  yOff: number;
  /** 0 none, 1 tanh, 2 sigmoid, 3 relu squared. */
  act?: number;
  /** Add into y (the residual stream) instead of overwriting. */
  accum?: boolean;
}

/** What decides the kernels of a runtime. */
export interface MatmulConfig {
  /** The device's path (GpuContext.kernelPath). */
  kernelPath: KernelPath;
  /** How the group's weights are stored (MatrixGroup.format). */
  precision: WeightPrecision;
  /** Subgroups of exactly 32 lanes: mm_vec sums a row's lanes with subgroupAdd. */
  subgroup32: boolean;
  /** Up to this many rows the streaming kernel runs. */
  vecMaxRows: number;
  /** Token tile of mm_gemm. */
  gemmTile: 16 | 64;
  /** Split K of tall products across workgroups (tiled kernels); on by default (splitKFromEnv). */
  splitK?: boolean;
  /** Staged subgroup-matrix tiles for products of many rows (with split K; stagedFromEnv). */
  staged?: StagedTiles | null;
  /** Tiled subgroup-matrix products (mm_sgtile) for f16 groups of many rows (with split K; tiledFromEnv). */
  tiled?: TiledChoice | null;
  /** How the group's buffer orders its weights (MatrixGroup.layout); absent: rows. */
  layout?: WeightLayout;
  /** The model's f16 products are stored as 16×16 blocks (weight-blocks.ts), in this order: for describeKernels. */
  blocks?: BlockOrder;
}

/** What the split-K choice needs of a group: its widest input and its virtual output rows. */
export interface ProductShape {
  k: number;
  virtualRows: number;
  /** Room for partial sums (floats): no more splits than fit. */
  scratchFloats: number;
  /** Every input width of the group is a multiple of 16 and the runtime holds the tiled inputs (mm_sgtile). */
  tileable?: boolean;
  /** Every segment of the group is whole WIDE_TILE-output tiles: tiles of more than 64 outputs may run. */
  wideOutputs?: boolean;
}

/** The group uniform's layout (mm_common.wgsl): 8 segments of 8 words, then count and flags. */
const SEG_WORDS = 8;
export const MAX_SEGS = 8;
/** Segments start at virtual rows that are multiples of this, so no workgroup straddles two. */
export const SEGMENT_ALIGN = 64;

/** The subgroup-matrix arithmetic runs for f16 weights on a 'subgroup-matrix' device. */
export function usesSubgroupMatrix(c: Pick<MatmulConfig, 'kernelPath' | 'precision'>): boolean {
  return c.kernelPath === 'subgroup-matrix' && c.precision === 'f16';
}

/** int8 groups run on the staged subgroup-matrix tiles (their codes widened to f16) on a 'subgroup-matrix' device. */
export function usesStagedInt8(c: Pick<MatmulConfig, 'kernelPath' | 'precision' | 'splitK' | 'staged'>): boolean {
  return c.kernelPath === 'subgroup-matrix' && c.precision === 'int8' && !!c.splitK && !!c.staged;
}

/** The staged tiles (of `staged`) for a product of `shape`: the large ones for ≥ 3 M weights with K ≥ 2048. */
function stagedFor(staged: StagedTiles, shape: ProductShape): StagedChoice {
  return shape.k < STAGED_LARGE_MIN_K || shape.k * shape.virtualRows < SMALL_PRODUCT_WEIGHTS ? staged.small : staged.large;
}

/** The streaming kernel for `rows` rows (over blocks, mm_vec_blocks: 32 lanes a row's worth, 8 rows a workgroup). */
function streaming(rows: number, layout?: WeightLayout): MatmulVariant {
  const lpr = inBlocks(layout) ? 32 : VEC_LANES;
  return lpr === 32 ? { kind: 'vec', tb: rows <= 4 ? 4 : 8 } : { kind: 'vec', tb: rows <= 4 ? 4 : 8, lpr };
}

/** The kernel for a product over `rows` rows (of a group of `shape`, which the split-K choice reads). */
export function chooseMatmul(rows: number, c: MatmulConfig, shape?: ProductShape): MatmulVariant {
  if (rows <= c.vecMaxRows) return streaming(rows, c.layout);
  if (shape && usesStagedInt8(c)) {
    // int8 has no other matrix-unit kernel, so every row count above the streaming kernel's takes the tiles; the
    // small products' tiles (1×2 per subgroup, KC 32) won nearly every int8 shape on the H200, large ones too:
    // 2048×8192 at 32 tokens 88 against 115 µs, 8192×2048 at 128 tokens 170 against 317 (2026-12-03 s4 run 5).
    const { variant } = c.staged!.small;
    return { ...variant, split: chooseSplit(variant, shape, rows) };
  }
  if (c.splitK && shape && usesSubgroupMatrix(c)) {
    // (vecMaxRows 0 asks for tiles everywhere, e.g. bench/golden-check's 'tiled' run, so not then.)
    if (c.vecMaxRows > 0 && rows <= SMALL_PRODUCT_VEC_ROWS && shape.k * shape.virtualRows < SMALL_PRODUCT_WEIGHTS) return streaming(rows, c.layout);
    // Tiled products write whole tiles of partial sums even unsplit: where those do not fit, the staged tiles run.
    const tiled = c.tiled && tiledFor(c.tiled, shape, rows);
    const tiledFits = () => splitScratchFloats({ ...tiled!, split: 1 }, shape.virtualRows, rows) <= shape.scratchFloats;
    if (tiled && shape.tileable && rows >= c.tiled!.minRows && tiledFits()) return { ...tiled, split: chooseSplit(tiled, shape, rows) };
    const staged = c.staged && stagedFor(c.staged, shape);
    if (staged && rows >= staged.minRows) return { ...staged.variant, split: chooseSplit(staged.variant, shape, rows) };
    // Split subgroup-matrix tiles at every row count above the streaming kernel's: with K split they beat the
    // f32 tiles in prefill too (1.5B FFN at 512 tokens: 739 against 3,136 µs).
    const base: MatmulVariant = { kind: 'sgmat', mt: SPLIT_SGMAT_MT, nt: 1, sgs: 4, kc: 64 };
    return { ...base, split: chooseSplit(base, shape, rows) };
  }
  if (usesSubgroupMatrix(c) && rows <= 128) {
    // Measured on the H200 (bench/RESULTS.md, gpu runs 1–2): one 16×16 tile per subgroup, four subgroups a
    // workgroup (64 outputs), beats streaming and f32 tiles from 33 to 128 tokens (2048² at 64 tokens: 69 µs
    // against 84 and 104; 1.5B decode at batch 64: 2172 tok/s against 1515 streaming). Above 128 tokens this
    // first subgroup-matrix kernel lost to the f32 tiles in the engine (1.5B prefill 512: 5741 tok/s against
    // 6982 in earlier runs), so prefill chunks keep the f32 tiles until the kernel stages weights in shared memory.
    return { kind: 'sgmat', mt: 1, nt: 1, sgs: 4, kc: 64 };
  }
  const gemm: MatmulVariant = { kind: 'gemm', tile: c.gemmTile };
  if (c.splitK && shape && c.gemmTile === 64) return { ...gemm, split: chooseSplit(gemm, shape, rows) };
  return gemm;
}

/**
 * How far a tiled product splits K: towards `workgroups`, at most `maxK` inputs a split, at least `minK`, and at most
 * `maxSplit` splits (MAX_SPLIT when absent).
 */
export interface SplitPolicy {
  workgroups: number;
  maxK: number;
  minK: number;
  maxSplit?: number;
}

const SPLIT_POLICY: SplitPolicy = { workgroups: SPLIT_TARGET_WORKGROUPS, maxK: SPLIT_MAX_K, minK: SPLIT_MIN_K };
/**
 * The staged tiles keep a whole stage of 64 tokens × 64 outputs busy, so they want fewer workgroups and longer
 * splits (H200, bench section `matmul`): unsplit won 8192×2048 at 128 and 512 tokens (256 and 1024 workgroups)
 * and 768² at 512 (96 workgroups, K = 768); 4 splits won 2048² at 128 tokens (64 workgroups) and 2048×8192 at 512
 * (K = 8192).
 */
const STAGED_SPLIT_POLICY: SplitPolicy = { workgroups: 256, maxK: 2048, minK: 512 };
/**
 * The tiled product (H200, sgmat-layout-probe): 8 splits won 2048² and 2048×8192 at 64 tokens (32 workgroups
 * unsplit), 2 splits 8192×2048 at 64 (128) and 2048×8192 at 512 (K = 8192); 2048² and 8192×2048 at 512 tokens
 * (256 and 1,024 workgroups) were best unsplit or within 5% of it.
 */
const TILED_SPLIT_POLICY: SplitPolicy = { workgroups: 256, maxK: 4096, minK: 256 };
/**
 * Splits of the tiled product go towards this many subgroups from DEFAULT_TILED.largeRows rows on (TILED_SPLIT_POLICY's
 * 256 workgroups of the 2×2×2×2 tiles, which it was measured for): in the H200 probe (gemm-probe, 2026-12-04) that also
 * won or came within 5% of the best split for 4×4 tiles (8192×2048 at 512 unsplit, 2048×8192 (K) at 512 in 4) and for
 * 4×2 tiles in two subgroups (2048² at 512 in 2).
 */
const TILED_SUBGROUPS = 1024;
/**
 * Below DEFAULT_TILED.largeRows rows (batched decode, chunks of up to 255 tokens) splits go towards 4× as many: a 1.5B
 * product at 64 rows then runs ~4,096 subgroups instead of ~1,024 (about 8 of the 64 an H200 SM holds), more weight
 * loads in flight. Engine section on the H200, alternating processes (sixteenth session): 1.5B drawn b64 9,220–9,290
 * tok/s against 8,250–8,270, prefill c128 12,354 / 12,441 against 10,628 / 10,807; the same target at 512 rows lost
 * (c512 22,587 / 22,784 against 25,633 / 25,869), so larger chunks keep TILED_SUBGROUPS.
 */
const TILED_SUBGROUPS_FEW_ROWS = 4096;
/** Most K splits of a tiled product (the FFN value's K of 8192 in splits of 256 inputs). */
export const MAX_TILED_SPLIT = 32;

/** Subgroups a tiled product over `rows` rows splits towards (in at most MAX_TILED_SPLIT splits). */
export type TiledSplitTarget = (rows: number) => number;

/**
 * The default target (TILED_SUBGROUPS_FEW_ROWS below DEFAULT_TILED.largeRows rows, TILED_SUBGROUPS from there), or
 * one target for every row count from RWKV_MATMUL_TILED_SUBGROUPS (512 … 8192), for A/B runs on a GPU. Other values
 * are refused naming the variable.
 */
export function tiledSplitTargetFrom(value: string | undefined): TiledSplitTarget {
  if (value === undefined || value === '') return (rows) => (rows < DEFAULT_TILED.largeRows ? TILED_SUBGROUPS_FEW_ROWS : TILED_SUBGROUPS);
  const subgroups = numberChoice('RWKV_MATMUL_TILED_SUBGROUPS', value, [512, 1024, 2048, 4096, 8192] as const, TILED_SUBGROUPS);
  return () => subgroups;
}
const TILED_SPLIT_TARGET = tiledSplitTargetFrom(process.env.RWKV_MATMUL_TILED_SUBGROUPS);

/**
 * K splits for a product: the fewest (a power of two, at most the policy's maxSplit) that give the product the policy's
 * workgroups and each split at most its maxK inputs, each split keeping minK inputs and all partial sums fitting
 * the scratch.
 */
export function chooseSplit(v: MatmulVariant, shape: ProductShape, rows: number, tiledTarget = TILED_SPLIT_TARGET): number {
  const policy: SplitPolicy = v.kind === 'sgstage' ? STAGED_SPLIT_POLICY
    : v.kind === 'sgtile' ? { ...TILED_SPLIT_POLICY, workgroups: tiledTarget(rows) / (v.sgm * v.sgn * tiledSlicesOf(v)), maxSplit: MAX_TILED_SPLIT }
    : SPLIT_POLICY;
  const most = policy.maxSplit ?? MAX_SPLIT;
  const [x, y] = matmulDispatch(v, shape.virtualRows, rows);
  let split = 1;
  const fits = (s: number) => (v.kind === 'sgtile' ? splitScratchFloats({ ...v, split: s }, shape.virtualRows, rows) : s * rows * shape.virtualRows) <= shape.scratchFloats;
  const wants = (s: number) => x * y * s < policy.workgroups || shape.k / s > policy.maxK;
  while (split < most && wants(split) && shape.k / (split * 2) >= policy.minK && fits(split * 2)) split *= 2;
  return split;
}

/** K splits of a variant (1: none). */
export function splitOf(v: MatmulVariant): number {
  return v.kind === 'vec' ? 1 : (v.split ?? 1);
}

/** The weight prelude: how a kernel reads W (shaders/weights_*.wgsl; load_w8 at binding 1). */
export function weightPrelude(v: MatmulVariant, c: Pick<MatmulConfig, 'kernelPath' | 'precision'>): string {
  if (v.kind === 'sgmat' || v.kind === 'sgtile') return 'weights_f16_matrix';
  if (v.kind === 'sgstage') return c.precision === 'int8' ? 'weights_i8_staged' : 'weights_f16_staged';
  if (c.precision === 'f32') return 'weights_f32';
  if (c.precision === 'int8') return 'weights_i8';
  if (c.precision === 'nf4') return 'weights_nf4';
  return c.kernelPath === 'f32' ? 'weights_f16' : 'weights_f16_native';
}

type ProductShader = { key: string; parts: string[]; constants: Record<string, ShaderConstant>; bindings: BindingKind[] };
/**
 * Shaders already described, by variant and configuration: a runtime records a call's ops again whenever its shape is
 * new (a served prefill beside decode jobs changes shape every call), and generating a tiled product's code each
 * time took ~1.8 ms of a 24-layer call's 3.4 ms of recording on a 2-core VM. Read-only for callers.
 */
const described = new Map<string, Readonly<ProductShader>>();

/** Name, shader parts, constants and bindings of a variant's kernel on a configuration. */
export function matmulShader(v: MatmulVariant, c: Pick<MatmulConfig, 'kernelPath' | 'precision' | 'subgroup32' | 'layout'>): Readonly<ProductShader> {
  const memo = JSON.stringify([v, c.kernelPath, c.precision, c.subgroup32, c.layout ?? null]);
  let shader = described.get(memo);
  if (!shader) {
    if (described.size >= 256) described.clear();
    described.set(memo, (shader = describeProduct(v, c)));
  }
  return shader;
}

function describeProduct(v: MatmulVariant, c: Pick<MatmulConfig, 'kernelPath' | 'precision' | 'subgroup32' | 'layout'>): ProductShader {
  const shader = layoutFree(v, c);
  // Every product reads its weights through its group's layout part; blocks get their own pipelines.
  const at = shader.parts.indexOf('mm_common') + 1;
  const parts = [...shader.parts.slice(0, at), weightLayoutPart(c.layout), ...shader.parts.slice(at)];
  return { ...shader, key: inBlocks(c.layout) ? `${shader.key}:${c.layout}` : shader.key, parts };
}

/** matmulShader before the layout part. */
function layoutFree(
  v: MatmulVariant,
  c: Pick<MatmulConfig, 'kernelPath' | 'precision' | 'subgroup32' | 'layout'>,
): { key: string; parts: string[]; constants: Record<string, ShaderConstant>; bindings: BindingKind[] } {
  if (v.kind === 'sgmat' && !usesSubgroupMatrix(c)) throw new Error('the subgroup-matrix kernel needs f16 weights on a subgroup-matrix device');
  if (v.kind === 'sgstage' && !(c.kernelPath === 'subgroup-matrix' && (c.precision === 'f16' || c.precision === 'int8')))
    throw new Error('the staged subgroup-matrix kernel needs f16 or int8 weights on a subgroup-matrix device');
  if (v.kind === 'sgtile' && !usesSubgroupMatrix(c)) throw new Error('the tiled subgroup-matrix kernel needs f16 weights on a subgroup-matrix device');
  if (v.kind === 'sgtile' && (16 * v.nt * v.sgn > WIDE_TILE || 16 * v.mt * v.sgm > WIDE_TILE))
    throw new RangeError(`a tiled product's workgroup of ${16 * v.mt * v.sgm} tokens × ${16 * v.nt * v.sgn} outputs exceeds ${WIDE_TILE} × ${WIDE_TILE}`);
  if (v.kind === 'sgstage' && 16 * v.nt * v.sgn > SEGMENT_ALIGN) throw new RangeError(`a staged tile of ${16 * v.nt * v.sgn} outputs would straddle segments (${SEGMENT_ALIGN} apart)`);
  const sub = c.subgroup32 ? 'subgroup_on' : 'subgroup_off';
  const w = weightPrelude(v, c);
  const split = splitOf(v);
  const most = v.kind === 'sgtile' ? MAX_TILED_SPLIT : MAX_SPLIT;
  if (split < 1 || split > most || !Number.isInteger(split)) throw new RangeError(`K split ${split} is outside 1..${most}`);
  if (v.kind === 'gemm' && v.tile === 16 && split > 1) throw new Error('split K runs on the 64-token tiles only');
  // A split product also binds its partial sums (binding 5); the tiled product always does (it writes whole tiles
  // there even unsplit), and binds its tiled inputs too (binding 6).
  // A split product's partial sums go to its reduction pass, which stores the blocks (splitReduceShader).
  const blocksOut = v.kind === 'sgtile' && v.blocksOut === true && split === 1;
  const bindings: BindingKind[] = v.kind === 'sgtile' ? [...TILED_PRODUCT_BINDINGS, ...(blocksOut ? (['rw'] as const) : [])] : split > 1 ? [...PRODUCT_BINDINGS, 'rw'] : PRODUCT_BINDINGS;
  const kParts = split > 1 ? ['split_layout', 'mm_split'] : ['mm_whole'];
  const splitName = split > 1 ? `s${split}` : '';
  switch (v.kind) {
    case 'vec': {
      const loads = v.loads ?? VEC_LOADS;
      if (inBlocks(c.layout)) {
        if ((v.lpr ?? 32) !== 32) throw new Error('the streaming kernel over blocks runs 8 rows a workgroup (no lanes-per-row choice)');
        return { key: `mm_vec_blocks${v.tb}u${loads}:${w}`, parts: [sub, w, 'mm_common', 'mm_vec_blocks'], constants: { TB: v.tb, LOADS: loads }, bindings };
      }
      return { key: `mm_vec${v.tb}${v.lpr && v.lpr !== 32 ? `l${v.lpr}` : ''}u${loads}:${w}`, parts: [sub, w, 'mm_common', 'mm_vec'], constants: { TB: v.tb, LPR: v.lpr ?? 32, LOADS: loads }, bindings };
    }
    case 'gemm': {
      if (v.tile === 16) return { key: `mm_gemm16:${w}`, parts: [sub, w, 'mm_common', 'gemm_tiles', 'mm_gemm16'], constants: { TB: 8 }, bindings };
      return { key: `mm_gemm${splitName}:${w}`, parts: [sub, w, 'mm_common', 'gemm_tiles', ...kParts, 'mm_gemm'], constants: { TB: 8, SPLIT: split }, bindings };
    }
    case 'sgmat':
      return {
        key: `mm_sgmat${v.mt}x${v.nt}x${v.sgs}k${v.kc}${splitName}`,
        parts: [w, 'mm_common', ...kParts, 'mm_sgmat'],
        constants: { MT: v.mt, NT: v.nt, SGS: v.sgs, KC: v.kc, SPLIT: split, ...stagedRowsCode(v.mt, v.nt, v.kc) },
        bindings,
      };
    case 'sgstage':
      return {
        key: `mm_sgstage${v.mt}x${v.nt}x${v.sgm}x${v.sgn}k${v.kc}${splitName}:${w}`,
        parts: [w, 'mm_common', ...kParts, 'mm_sgstage'],
        constants: { MT: v.mt, NT: v.nt, SGM: v.sgm, SGN: v.sgn, KC: v.kc, SPLIT: split },
        bindings,
      };
    case 'sgtile': {
      const ku = v.ku ?? TILED_KU;
      const pipe = v.pipe ?? TILED_PIPE;
      const sk = tiledSlicesOf(v);
      return {
        key: `mm_sgtile${v.mt}x${v.nt}x${v.sgm}x${v.sgn}${splitName}${ku > 1 ? `k${ku}` : ''}${pipe ? 'p' : ''}${sk > 1 ? `q${sk}` : ''}${blocksOut ? 'b' : ''}`,
        // Split: through the partial sums (mm_split.wgsl) and the reduction pass; unsplit, it stores its own results.
        parts: [w, 'mm_common', 'sgtile_layout', 'mm_split', ...(blocksOut ? ['block_layout', 'sgtile_blocks_out'] : []), 'mm_sgtile'],
        constants: { MT: v.mt, NT: v.nt, SGM: v.sgm, SGN: v.sgn, SPLIT: split, KU: ku, SK: sk, TILE_TOKENS: tileTokensOf(v), ...tiledProductCode(v.mt, v.nt, ku, split, blocksOut, pipe, sk) },
        bindings,
      };
    }
  }
}

/** The input-tiling pass of a tiled product (mm_sgtile_x.wgsl): the product's bindings, so one set serves both. */
export function tileInputShader(tileTokens = TILE_TOKENS): { key: string; parts: string[]; constants: Record<string, number>; bindings: BindingKind[] } {
  const key = tileTokens === TILE_TOKENS ? 'mm_sgtile_x' : `mm_sgtile_x${tileTokens}`;
  return { key, parts: ['weights_f16', 'mm_common', 'sgtile_layout', 'block_layout', 'mm_sgtile_x'], constants: { TILE_TOKENS: tileTokens }, bindings: TILE_INPUT_BINDINGS };
}

const PRODUCT_BINDINGS: BindingKind[] = ['uniform', 'read', 'read', 'rw', 'uniform'];
/** The tiled product and its reduction read the tiled inputs (binding 6) read-only; the tiling pass writes them. */
const TILED_PRODUCT_BINDINGS: BindingKind[] = [...PRODUCT_BINDINGS, 'rw', 'read'];
const TILE_INPUT_BINDINGS: BindingKind[] = [...PRODUCT_BINDINGS, 'rw', 'rw'];

/**
 * The second dispatch of a split product, and of every tiled product (mm_split_reduce.wgsl, over the partial-sum
 * layout of split_layout.wgsl or sgtile_layout.wgsl): its bindings are the product's, so one bind
 * group serves both. It stores through mm_common's store(), which reads the weight prelude's row scale.
 */
export function splitReduceShader(
  v: MatmulVariant,
  c: Pick<MatmulConfig, 'kernelPath' | 'precision' | 'subgroup32'>,
  rows: number,
): { key: string; parts: string[]; constants: Record<string, number>; bindings: BindingKind[] } {
  const split = splitOf(v);
  const w = weightPrelude(v, c);
  const { vr, rt } = reduceShape(rows);
  const constants = { SPLIT: split, VR: vr, RT: rt };
  const shape = vr > 1 || rt > 1 ? `x${vr}t${rt}` : '';
  if (v.kind === 'sgtile') {
    const tokens = tileTokensOf(v);
    // With blocksOut the pass stores the next product's f16 blocks (binding 7) instead of f32 rows.
    const out = v.blocksOut ? ['block_layout', 'sgtile_blocks_out', 'reduce_store_blocks'] : ['reduce_store_rows'];
    const key = `mm_split_reduce${split}${shape}:tiled${tokens === TILE_TOKENS ? '' : tokens}${v.blocksOut ? ':blocks' : ''}`;
    const bindings: BindingKind[] = v.blocksOut ? [...TILED_PRODUCT_BINDINGS, 'rw'] : TILED_PRODUCT_BINDINGS;
    return { key, parts: [w, 'mm_common', 'sgtile_layout', 'mm_split', ...out, 'mm_split_reduce'], constants: { ...constants, TILE_TOKENS: tokens }, bindings };
  }
  if (split <= 1) throw new Error('only a split-K product has a reduction pass');
  return { key: `mm_split_reduce${split}${shape}:${w}`, parts: [w, 'mm_common', 'split_layout', 'mm_split', 'reduce_store_rows', 'mm_split_reduce'], constants, bindings: [...PRODUCT_BINDINGS, 'rw'] };
}

/**
 * What one invocation of the reduction pass covers (mm_split_reduce.wgsl): `vr` neighbouring virtual rows of `rt`
 * tokens. From REDUCE_WIDE_ROWS rows (prefill chunks) 4 × 4, so each invocation has 4·4·SPLIT loads in flight: a
 * 1.5B prefill-512 step's three unsplit reductions took 2.05 instead of 3.2 ms on the H200. Fewer rows keep 1 × 1:
 * at 8 and 64 rows the wider shape left too few workgroups and the engine lost 5–13% (bench/RESULTS.md "Reductions").
 */
export const REDUCE_WIDE_ROWS = 128;
export function reduceShape(rows: number): { vr: number; rt: number } {
  return rows >= REDUCE_WIDE_ROWS ? { vr: 4, rt: 4 } : { vr: 1, rt: 1 };
}

/** Workgroups of the reduction pass of a split product (64 invocations each). */
export function splitReduceDispatch(virtualRows: number, rows: number, blocksOfTokens = 0): [number, number] {
  const { vr, rt } = reduceShape(rows);
  // Storing the next product's blocks, the pass also writes the padded rows (zeros) up to its token tiles.
  const covered = blocksOfTokens > 0 ? Math.ceil(rows / blocksOfTokens) * blocksOfTokens : rows;
  return [Math.ceil(virtualRows / (64 * vr)), Math.ceil(covered / rt)];
}

/**
 * Floats of partial sums a product writes: a split product's per split, token and virtual row (0 unsplit); a tiled
 * product's whole 16×16 tiles, split or not: rows padded to TILE_TOKENS, virtual rows to SEGMENT_ALIGN
 * (sgtile_layout.wgsl part_index).
 */
export function splitScratchFloats(v: MatmulVariant, virtualRows: number, rows: number): number {
  const split = splitOf(v);
  if (v.kind === 'sgtile') {
    const tokens = tileTokensOf(v);
    const outputs = Math.max(SEGMENT_ALIGN, tileOutputs(v));
    return split * Math.ceil(rows / tokens) * tokens * Math.ceil(virtualRows / outputs) * outputs;
  }
  return split > 1 ? split * rows * virtualRows : 0;
}

/**
 * A second pass follows the product: split products add their partial sums. (Unsplit tiled products went through it
 * too until they stored their own results: a 1.5B prefill-512 step ran three reductions of ~30 µs a layer.)
 */
export function reducesAfter(v: MatmulVariant): boolean {
  return splitOf(v) > 1;
}

/** Output rows one workgroup of the variant covers. */
function rowsPerWorkgroup(v: MatmulVariant): number {
  if (v.kind === 'sgstage' || v.kind === 'sgtile') return 16 * v.nt * v.sgn;
  return v.kind === 'vec' ? 256 / (v.lpr ?? 32) : v.kind === 'gemm' ? 64 : 16 * v.nt * v.sgs;
}

/** Tokens one workgroup of the variant covers. */
function tokensPerWorkgroup(v: MatmulVariant): number {
  if (v.kind === 'sgstage' || v.kind === 'sgtile') return 16 * v.mt * v.sgm;
  return v.kind === 'vec' ? v.tb : v.kind === 'gemm' ? v.tile : 16 * v.mt;
}

/** Workgroups of the product: outputs, tokens, K splits. */
export function matmulDispatch(v: MatmulVariant, virtualRows: number, rows: number): [number, number, number] {
  return [Math.ceil(virtualRows / rowsPerWorkgroup(v)), Math.ceil(rows / tokensPerWorkgroup(v)), splitOf(v)];
}

/**
 * The uniform describing a matrix group at one use site: per segment its virtual row start, shape, weight
 * offset, input and output offsets, activation and flags; and the virtual row count to dispatch over.
 */
export function groupUniform(key: string, g: MatrixGroup, io: SegmentIO[], useR: boolean): { words: Uint32Array; virtualRows: number } {
  if (io.length !== g.segs.length) throw new Error(`${key}: ${g.segs.length} matrices but ${io.length} inputs`);
  if (g.segs.length > MAX_SEGS) throw new Error(`${key}: at most ${MAX_SEGS} matrices in a group, got ${g.segs.length}`);
  const words = new Uint32Array(MAX_SEGS * SEG_WORDS + 4);
  let row0 = 0;
  g.segs.forEach((seg, i) => {
    const x = io[i].xOff;
    if (x % 4 !== 0) throw new Error(`${key}: input offset ${x} is not a multiple of 4`);
    words.set([row0, seg.n, seg.k, seg.wOff, x / 4, io[i].yOff, io[i].act ?? 0, io[i].accum ? 1 : 0], i * SEG_WORDS);
    row0 += Math.ceil(seg.n / SEGMENT_ALIGN) * SEGMENT_ALIGN;
  });
  const last = g.segs[g.segs.length - 1];
  const virtualRows = row0 - Math.ceil(last.n / SEGMENT_ALIGN) * SEGMENT_ALIGN + last.n;
  // p1: the virtual rows, the row stride of a split product's partial sums (mm_split.wgsl).
  words.set([g.segs.length, useR ? 1 : 0, g.scaleWord ?? 0, virtualRows], MAX_SEGS * SEG_WORDS);
  return { words, virtualRows };
}

/** One line for `rwkv-flow info` and benchmark records: which kernels run for how many rows. */
export function describeKernels(c: MatmulConfig): string {
  const loads =
    c.precision === 'f32' ? 'f32 weights'
    : c.precision === 'int8' ? 'int8 weights (f16 row scales), small matrices f16'
    : c.precision === 'nf4' ? 'nf4 weights (f16 absmax per 64), small matrices f16'
    : c.kernelPath === 'f32' ? 'f16 weights unpacked from u32' : 'f16 weights read as f16';
  const tiles = `f32 multiply-adds in ${c.gemmTile}-token tiles`;
  // With split K (the default) subgroup matrices take every row count above the streaming kernel's; without it,
  // the first subgroup-matrix kernel runs up to 128 rows and the f32 tiles above.
  const splitMatrices = !!c.splitK && usesSubgroupMatrix(c);
  const above = splitMatrices ? 'subgroup matrices (f16×f16→f32, 16×16×16)'
    : usesSubgroupMatrix(c) ? `subgroup matrices (f16×f16→f32, 16×16×16) up to 128 rows, ${tiles} above`
    : usesStagedInt8(c) ? 'the int8 codes widened to f16 on subgroup matrices, tiles staged in workgroup memory (RWKV_MATMUL_STAGED=off: f32 tiles)'
    : tiles;
  // Quantised models keep f16 LoRA groups, which take the subgroup-matrix kernel where the device has it.
  const quantised = c.precision === 'int8' || c.precision === 'nf4';
  const smallOnMatrices = quantised && usesSubgroupMatrix({ ...c, precision: 'f16' }) ? ' (the f16 matrices: subgroup matrices)' : '';
  const tiled = splitMatrices && c.tiled
    ? `, from ${c.tiled.minRows} rows with inputs tiled as f16 16×16 blocks first and both operands read straight from storage (RWKV_MATMUL_TILED=off: not)`
    : '';
  const staged = splitMatrices && c.staged && !c.tiled
    ? `, from ${c.staged.large.minRows} rows (${c.staged.small.minRows} for small matrices or K < ${STAGED_LARGE_MIN_K}) on tiles staged in workgroup memory (RWKV_MATMUL_STAGED=off: not)`
    : '';
  const split = c.splitK ? `; K split over up to ${MAX_SPLIT} workgroups (${MAX_TILED_SPLIT} for tiled products) where a product has few or K is long (RWKV_MATMUL_SPLIT_K=0: off)` : '';
  const blocks = c.blocks ? `; f16 product weights stored as 16×16 blocks${c.blocks === 'input-blocks' ? ', input by input' : ''} (RWKV_WEIGHT_BLOCKS=off: rows)` : '';
  return `${c.kernelPath} path, ${loads}: up to ${c.vecMaxRows} rows streaming (f32 arithmetic), more rows on ${above}${smallOnMatrices}${tiled}${staged}${split}${blocks}`;
}
