// The batched RWKV-7 forward pass on WebGPU. All tokens of one call are flattened into one [T, C] batch
// (each slot's tokens contiguous), so every matrix product runs once over the whole batch whatever mix of
// prefill chunks and single decode tokens it holds; only the WKV recurrence walks each slot's tokens in order.
// A call larger than the scratch buffers is split into sub-passes that are all submitted before the single
// read-back, so a call costs one GPU round trip.
// RWKV-7a adds its DeepEmbed gate to the channel mix; RWKV-7b also its DEA attention, whose per-slot cache of K / V
// rows grows with the context (deaRows; snapshots carry it as the CPU backend's do, engine/state-shape.ts).

import { numberChoice } from '../env-choice';
import { withWgSum } from '../gpu/wg-sum';
import type { ShaderConstant } from '../gpu/shader-source';
import { lnShiftSplit } from '../gpu/ln-shift-split';
import { checkJob } from '../job-checks';
import { DRAW_CONTINUATION_STEPS, MAX_DRAW_STEPS, type DrawJob, type InferenceBackend, type JobResult, type ModelInfo, type OutputMode, type SlotJob, type StateSnapshot } from '../types';
import { gpuBroken, releaseGpu, watchGpu, type GpuContext } from '../gpu/device';
import { BufferRange, createBuffer, Kernel, makeKernel } from '../gpu/kernel';
import { BindGroupCache } from '../gpu/bind-group-cache';
import { EncodedAhead, encodeAll } from '../gpu/encoded-ahead';
import type { KernelProfiler } from '../gpu/kernel-profiler';
import type { StepSpan } from '../gpu/step-span';
import { TOP_CAPACITY, TopLogitsReducer } from './top-logits';
import { TopDrawer } from './top-draw';
import { behindBoth, GpuDraws } from '../gpu/draw-call';
import { writeSubPassInputs, type InputSegment, type SubPassBuffers } from '../gpu/sub-pass-inputs';
import type { MatrixGroup, ModelWeights } from './weights';
import { inBlocks, weightLayoutPart, type BlockOrder } from './weight-blocks';
import { matrixGroupsOf, tileableGroup, tiledInputCapacity } from './tiled-inputs';
import { normRows, normTileWrites, type NormTiles } from './norm-tiles';
import {
  chooseMatmul, describeKernels, groupUniform, matmulDispatch, matmulShader, splitKFromEnv, stagedFromEnv, stagedWithin, type StagedTiles, tiledFromEnv, type TiledChoice, tileInputDispatch, tileInputShader, reducesAfter, usesStagedInt8, usesSubgroupMatrix, MAX_SPLIT, SPLIT_SGMAT_VEC_ROWS, splitReduceDispatch, splitReduceShader,
  weightPrelude, type SegmentIO, maxTileTokens, tileTokensOf, WIDE_TILE, splitOf, tiledInputHalves,
} from './matmul';
import { DEEP_EMBED_ROW } from '../model-spec';
import { quantLayersNote } from '../precision';
import { DEA_QK, deaRowFloats } from './dea-sizes';
import { inPieces, YIELD_FLOATS } from '../yield-chunks';
import { DEFAULT_MAX_CONTEXT, snapshotRows } from '../state-shape';
import { chooseWkv, describeWkv, wkvDevice, wkvMaxChunks, wkvPasses, wkvScratchFloats, wkvUnsupported, wkvVariantName, type WkvDevice, type WkvVariant } from './wkv';

/** Jobs beside a TMAX-token prefill the chunked WKV's scratch has room for (Rwkv7Runtime.wkvChunkCapacity). */
const WKV_CHUNK_JOBS = 16;

export interface RuntimeOptions {
  slots: number;
  /** Most tokens in one sub-pass (the prefill chunk budget of a call). */
  maxTokens: number;
  /** Most logits rows in one sub-pass. */
  maxRows: number;
  /**
   * Up to this many tokens a matrix product streams the weights once per 8 tokens (bandwidth-bound
   * kernel) instead of tiling 64 tokens (compute-bound kernel). Default 32.
   */
  vecMaxRows?: number;
  /** Tokens per tile of the tiled kernel: 64 (default) or 16 (more workgroups for mid-size batches). */
  gemmTile?: 16 | 64;
  /**
   * Decode steps (one token a job) of up to this many jobs run the fused time mix (fewer dispatches a layer,
   * shaders/rwkv7_tmix_decode.wgsl); 0 turns it off. Default: RWKV_FUSE_DECODE_JOBS from the environment
   * (benchmarks compare with and without), else DECODE_FUSE_JOBS.
   */
  fuseDecodeJobs?: number;
  /** Split K of tiled products (matmul.ts); default on unless RWKV_MATMUL_SPLIT_K=0 in the environment. */
  splitK?: boolean;
  /** The runtime acquired the device itself: dispose() destroys it. A device lent from outside is left alone. */
  ownsDevice?: boolean;
  /** RWKV-7b: most tokens one slot's state may hold (engine config maxContext; default DEFAULT_MAX_CONTEXT). */
  maxContext?: number;
}

/** RWKV-7b: rows each slot's cache holds before the first growth (tiny, so short contexts cost little). */
const DEA_FIRST_ROWS = 16;
/**
 * RWKV-7b: a sub-pass of fewer tokens than this splits each token's attention over ranges of rows (at most this
 * many workgroups in all, each range at least 256 rows), so a decode step over a long context fills the GPU.
 */
const DEA_SPLIT_WORKGROUPS = 256;

/**
 * Default of RuntimeOptions.fuseDecodeJobs. The fused kernel reads each head's second LoRA stages once per job
 * and sums rows through workgroup memory, where the separate path reads them once per step and may use
 * subgroups; its gain is the dispatches it saves (4 a layer). 8 until the sixteenth session, when the H200 ran
 * batches of 32 and 64 faster fused too (engine section, alternating processes, 1.5B drawn b32 6,397–6,414 tok/s
 * against 5,453–5,456, b64 8,472–8,550 against 8,258–8,263; bench/RESULTS.md, sixteenth session).
 */
export const DECODE_FUSE_JOBS = 64;

/** RWKV_FUSE_DECODE_JOBS (a whole number ≥ 0) where set, else DECODE_FUSE_JOBS; anything else is an error naming it. */
export function fuseDecodeJobsFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const v = env.RWKV_FUSE_DECODE_JOBS;
  if (v === undefined || v === '') return DECODE_FUSE_JOBS;
  if (!/^\d+$/.test(v)) throw new RangeError(`RWKV_FUSE_DECODE_JOBS must be a whole number of jobs (0 turns the fused decode step off), got '${v}'`);
  return Number(v);
}

/** Floats of partial sums kept for split-K products when they are on (32 MiB: 8 splits of 64 tokens × 16k outputs). */
const SPLIT_SCRATCH_FLOATS = 8 * 64 * 16384;

/** One job's tokens (or a piece of them) within a sub-pass; `base` always set (RWKV-7b's rows before it). */
interface Segment extends InputSegment {
  base: number;
  outMode: 'last' | 'all' | 'none' | 'top';
}

/** The pass commands of one sub-pass, recorded once per batch shape and replayed every step. */
type Op = { pipeline: GPUComputePipeline; group: GPUBindGroup; x: number; y: number; z: number; label: string } | 'submit';

class Recorder {
  readonly ops: Op[] = [];
  private pipeline: GPUComputePipeline | null = null;
  private group: GPUBindGroup | null = null;
  private nextLabel: string | null = null;

  setPipeline(p: GPUComputePipeline) {
    this.pipeline = p;
  }

  /** What the kernel profiler calls the next dispatch (default: the kernel's name without its constants). */
  label(name: string) {
    this.nextLabel = name;
  }

  setBindGroup(_index: 0, g: GPUBindGroup) {
    this.group = g;
  }

  dispatchWorkgroups(x: number, y = 1, z = 1) {
    const label = this.nextLabel ?? this.pipeline!.label.replace(/\(.*$/, '');
    this.nextLabel = null;
    this.ops.push({ pipeline: this.pipeline!, group: this.group!, x, y, z, label });
  }

  /** Submit what is recorded so far, so the GPU starts while the rest is encoded. */
  submit() {
    this.ops.push('submit');
  }
}

interface SubPass {
  segments: Segment[];
  tokens: number;
  rows: number;
}

/** Steps of 8 LoRA inputs the fused decode kernel loads together (Rwkv7Runtime.tmixLoraLoads). */
export type TmixLoraLoads = 1 | 2 | 4 | 8;

/**
 * RWKV_TMIX_LORA_LOADS=1|2|4|8 (benchmarks compare); unset: 4. H200 (bench/RESULTS.md "LoRA loads of the fused
 * decode time mix"): a 1.5B batch-1 step's GPU time 2,239 -> 2,168 us, all of it in the fused time mix.
 */
export function tmixLoraLoadsFrom(value: string | undefined): TmixLoraLoads {
  return numberChoice('RWKV_TMIX_LORA_LOADS', value, [1, 2, 4, 8] as const, 4);
}

/**
 * RWKV_TMIX_LANES=1|2|4|8 (benchmarks compare): lanes a state row of the fused decode time mix, where the head fits
 * (else the default's choice); unset: 4 where they fit (Rwkv7Runtime.decodeFuseLanes). 8 is 512 lanes a workgroup
 * at N = 64: half the LoRA steps and state columns a lane.
 */
export function tmixLanesFrom(value: string | undefined): 0 | 1 | 2 | 4 | 8 {
  return value ? numberChoice('RWKV_TMIX_LANES', value, [1, 2, 4, 8] as const, 4) : 0;
}

/** The bind-group key part of where a tiled product's blocks come from (norm-tiles.ts, sgtile_blocks_out.wgsl). */
function fromKey(from: BufferRange | undefined): string {
  if (!from) return '';
  return 'buffer' in from ? `:from${from.offset}` : ':from';
}

export class Rwkv7Runtime implements InferenceBackend {
  readonly slots: number;
  /** Benchmarks: while set, every dispatch is timed on its own (engine/gpu/kernel-profiler.ts). */
  profiler: KernelProfiler | null = null;
  /** Benchmarks: while set, each sub-pass is one timed pass, with the kernels it names left out (engine/gpu/step-span.ts). */
  stepSpan: StepSpan | null = null;
  /** Benchmarks: host times of each call (performance.now(): start, all submitted, read-back mapped, done). */
  onHostTimes: ((t: { start: number; submitted: number; mapped: number; done: number }) => void) | null = null;
  readonly stateSize: number;
  /** RWKV-7b: floats each cached token adds to a slot's state (0 for a fixed-size state; state-shape.ts). */
  readonly stateRowFloats: number;
  /** RWKV-7b: the context limit (rows one slot may hold). */
  readonly maxStateRows: number;
  readonly topCapacity = TOP_CAPACITY;
  private readonly device: GPUDevice;
  private readonly C: number;
  private readonly V: number;
  private readonly F: number;
  private readonly TMAX: number;
  private readonly RMAX: number;
  /** Tuning knobs (benchmarks): see RuntimeOptions. */
  vecMaxRows: number;
  gemmTile: 16 | 64;
  fuseDecodeJobs: number;
  /**
   * When a step's commands go to the GPU: after the first `firstSubmitLayers` layers, then every `layersPerSubmit`,
   * so the GPU starts while the rest is still encoded (benchmarks compare schedules).
   */
  submitSchedule = { firstSubmitLayers: 4, layersPerSubmit: 4 };
  /** Split K of tall products (RuntimeOptions.splitK). */
  readonly splitK: boolean;
  /** Staged subgroup-matrix tiles for many rows (matmul.ts stagedFromEnv). */
  readonly staged: StagedTiles | null;
  /** Tiled subgroup-matrix products for f16 groups of many rows (matmul.ts tiledFromEnv), null where none runs. */
  readonly tiled: TiledChoice | null;
  /** Halves of the tiled products' f16 inputs (tiled-inputs.ts), 0 without tiled products. */
  private readonly tiledInputHalves: number;
  /** Some f16 products are stored as 16×16 blocks (weight-blocks.ts), in which order: said in kernelPath. */
  private readonly weightBlocks: BlockOrder | undefined;
  /** Floats of the split products' partial sums (0 without split-K). */
  private readonly splitScratchFloats: number;
  private readonly wkvFacts: WkvDevice;
  /** The chunked WKV's per-chunk matrices (wkvScratch), by chunk length, each made when first needed. */
  private readonly wkvScratchBuffers = new Map<number, GPUBuffer>();
  private wkvForced: WkvVariant | null = null;
  /** Workgroups per token of the norm + token-shift kernel forced for every sub-pass (tests, benchmarks), or null: lnShiftSplit's choice. */
  lnSplit: number | null = null;
  /**
   * The norm kernels write the f16 blocks of the tiled product that reads their results next, which then runs without
   * its tiling pass: the layer norm + token shift for the r/k/v group and the FFN key (shaders/ln_shift_tiles.wgsl),
   * the time mix's group norm for the output product (post_tiles.wgsl). On unless RWKV_NORM_TILES=off (A/B, tests).
   */
  normTiles = process.env.RWKV_NORM_TILES !== 'off';
  /**
   * A tiled product whose results the next tiled product reads whole (FFN key → value, first → second LoRA stages)
   * stores them as that product's f16 blocks (shaders/sgtile_blocks_out.wgsl: unsplit itself, split in its reduction
   * pass), and the next runs without its tiling pass. On unless RWKV_PRODUCT_BLOCKS=off (A/B runs, tests).
   */
  productBlocks = process.env.RWKV_PRODUCT_BLOCKS !== 'off';
  /**
   * Steps of 8 inputs of the fused decode kernel's second LoRA stages whose loads it issues before summing
   * (shaders/rwkv7_tmix_decode.wgsl LU; the same sums in the same order whatever the value).
   */
  tmixLoraLoads: TmixLoraLoads = tmixLoraLoadsFrom(process.env.RWKV_TMIX_LORA_LOADS);
  /** Lanes a state row of the fused decode time mix where they fit (tmixLanesFrom; 0: the default's). Tests set it. */
  tmixLanes: 0 | 1 | 2 | 4 | 8 = tmixLanesFrom(process.env.RWKV_TMIX_LANES);
  private readonly layerStride: number;
  private readonly kernels = new Map<string, Kernel>();
  private readonly buf: Record<string, GPUBuffer> = {};
  private readonly layerUniforms: GPUBuffer[] = [];
  private readonly matUniforms = new Map<string, { buffer: GPUBuffer; virtualRows: number }>();
  private readonly groups: BindGroupCache;
  private readonly recorded = new Map<string, Op[]>();
  /** The next call's commands, encoded while this one waits for its read-back (encoded-ahead.ts). */
  readonly ahead = new EncodedAhead<Op[]>();
  private staging: GPUBuffer | null = null;
  private stateStaging: GPUBuffer | null = null;
  private topReducer: TopLogitsReducer | null = null;
  private topDrawer: TopDrawer | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;
  private readonly ownsDevice: boolean;
  private readonly unwatch: () => void;
  private readonly brokenListeners: ((reason: string) => void)[] = [];
  /** RWKV-7b: the rows each slot holds once the calls and state changes made so far have run. */
  private readonly rowCounts: number[];
  /**
   * RWKV-7b: per layer, every slot's cached K [256] and V [C] rows, [slots, deaCap, 256 + C]. deaCap doubles
   * (up to the context limit) when a slot needs more, so a slot's cache costs what its longest neighbour's does,
   * not the whole context limit up front.
   */
  private deaRows: GPUBuffer[] = [];
  private deaCap = 0;
  /** Bind groups holding the row buffers, dropped when they grow. */
  private readonly deaGroupKeys = new Set<string>();
  private rowsTmp: GPUBuffer | null = null;
  /** A shrink of the row buffers is queued (shrinkRowsLater). */
  private shrinkPending = false;
  /** RWKV-7b: row uploads (writeState) queued and not yet run; state changes made meanwhile queue behind them. */
  private rowWorkQueued = 0;

  constructor(
    private readonly gpu: GpuContext,
    readonly info: ModelInfo,
    private readonly weights: ModelWeights,
    opts: RuntimeOptions,
  ) {
    this.device = gpu.device;
    this.groups = new BindGroupCache(gpu.device);
    this.slots = opts.slots;
    this.C = info.nEmbd;
    this.V = weights.head.segs[0].n;
    this.F = info.ffnDim;
    this.TMAX = Math.max(1, opts.maxTokens);
    this.RMAX = Math.max(1, Math.min(opts.maxRows, this.TMAX));
    this.gemmTile = opts.gemmTile ?? 64;
    this.fuseDecodeJobs = opts.fuseDecodeJobs ?? fuseDecodeJobsFromEnv();
    this.splitK = opts.splitK ?? splitKFromEnv();
    this.staged = stagedWithin(stagedFromEnv(), gpu.device.limits.maxComputeWorkgroupStorageSize);
    // Tiled products need split K (their small-batch splits) and the subgroup-matrix path; f16 groups only.
    const tiled = this.splitK && gpu.kernelPath === 'subgroup-matrix' ? tiledFromEnv() : null;
    this.tiledInputHalves = tiled ? tiledInputCapacity(weights, this.TMAX, maxTileTokens(tiled)) : 0;
    this.tiled = this.tiledInputHalves > 0 ? tiled : null;
    this.weightBlocks = matrixGroupsOf(weights).map((g) => g.layout).find(inBlocks);
    // Split subgroup-matrix tiles beat the streaming kernel from 8 rows on the H200 (matmul.ts).
    // int8 too where its codes run on the staged tiles.
    const kernels = { kernelPath: gpu.kernelPath, precision: weights.precision, splitK: this.splitK, staged: this.staged };
    const splitTiles = (this.splitK && usesSubgroupMatrix(kernels)) || usesStagedInt8(kernels);
    this.vecMaxRows = opts.vecMaxRows ?? (splitTiles ? SPLIT_SGMAT_VEC_ROWS : 32);
    // Partial sums of split products: room for every split of the widest group at the most tokens, within a cap.
    this.splitScratchFloats = this.splitK ? Math.min(SPLIT_SCRATCH_FLOATS, MAX_SPLIT * this.TMAX * Math.max(this.F, 4 * this.C, 64)) : 0;
    const H = info.nHead;
    const N = info.headSize;
    // RWKV-7b adds dea_q, dea_k, dea_v before ffn_x (state-layout.ts); ffn_x stays the last C of a layer.
    this.layerStride = 2 * this.C + H * N * N + (weights.dea ? 2 * DEA_QK + this.C : 0);
    this.stateSize = info.nLayer * this.layerStride;
    this.stateRowFloats = weights.dea ? deaRowFloats(info) : 0;
    this.maxStateRows = weights.dea ? (opts.maxContext ?? DEFAULT_MAX_CONTEXT) : 0;
    this.rowCounts = new Array<number>(this.slots).fill(0);
    if (weights.dea) {
      const full = this.slots * this.maxStateRows * this.deaRowWidth * 4;
      const limit = Math.min(gpu.device.limits.maxStorageBufferBindingSize, gpu.device.limits.maxBufferSize);
      if (full > limit)
        throw new RangeError(
          `RWKV-7b: a context of ${this.maxStateRows} tokens in ${this.slots} slots needs ${full} bytes of cached rows per layer ` +
            `(${this.deaRowWidth * 4} per token and layer), more than this GPU binds in one buffer (${limit}); lower maxContext in the engine config or use fewer slots`,
        );
    }
    this.ownsDevice = opts.ownsDevice ?? false;
    // The chunked WKV's scratch holds a prefill of TMAX tokens in WKV_CHUNK_JOBS jobs (wkvScratch); the variant is
    // refused where that is more than the device binds.
    this.wkvFacts = wkvDevice(gpu, N, { heads: H, tokens: this.TMAX, jobs: WKV_CHUNK_JOBS });
    this.unwatch = watchGpu(gpu, (reason) => {
      for (const fn of this.brokenListeners) fn(reason);
    });
    this.allocate();
  }

  // ---- setup --------------------------------------------------------------------------------------------

  private allocate() {
    const { device, C, F, TMAX, RMAX, V } = this;
    const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    const f = (name: string, floats: number) => (this.buf[name] = createBuffer(device, name, floats * 4, S));
    this.buf.batch = createBuffer(device, 'batch', 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    f('ids', TMAX);
    f('tok', TMAX);
    f('jobs', this.slots * 4);
    f('rows', RMAX);
    f('x', TMAX * C);
    f('xn', TMAX * C);
    f('mix', 6 * TMAX * C);
    // Nine activation regions (head_common.wgsl), then the first LoRA stages' outputs of a fused decode step.
    f('tm', 9 * TMAX * C + 4 * TMAX * this.weights.maxLora);
    f('lora', 4 * TMAX * this.weights.maxLora);
    f('vfirst', TMAX * C);
    f('xx', TMAX * C);
    f('ffk', TMAX * F);
    f('xo', RMAX * C);
    f('logits', RMAX * V);
    // Partial sums of split-K products: a product splits no more than fits (chooseSplit).
    f('splitParts', Math.max(4, this.splitScratchFloats));
    // The tiled products' inputs as f16 (two a float), shared by every group: products run one after another.
    f('tiledInputs', Math.max(4, Math.ceil(this.tiledInputHalves / 2)));
    // A product's f16 blocks as the product before it writes them (productBlocksFor), which reads tiledInputs meanwhile:
    // the same room, as the consumers (FFN value, second LoRA stages) are groups tiledInputs is sized over.
    f('nextBlocks', Math.max(4, Math.ceil(this.tiledInputHalves / 2)));
    if (this.weights.deepEmbed) {
      // RWKV-7a: each token's e·s_emb_xᵀ for every layer, [layer][TMAX][1024]; the gate binds one layer's range.
      const bytes = this.info.nLayer * this.deepEmbedRegion * 4;
      if (bytes > device.limits.maxBufferSize)
        throw new RangeError(
          `RWKV-7a scratch of ${bytes} bytes (${this.info.nLayer} layers × ${TMAX} tokens × ${DEEP_EMBED_ROW} floats) exceeds this GPU's maxBufferSize ${device.limits.maxBufferSize}; use a smaller maxTokens`,
        );
      f('se', this.info.nLayer * this.deepEmbedRegion);
    }
    if (this.weights.dea) {
      // RWKV-7b: q, kc, vc [TMAX, 256 + 32 + 32]; k, v [TMAX, 256 + C] then each layer's e·k_emb_xᵀ, e·v_emb_xᵀ;
      // Q and the raw q, k̃, ṽ [TMAX, 256 + 512 + C] (shaders/rwkv7b_dea_rows.wgsl).
      f('deaProj', TMAX * (DEA_QK + 64));
      f('deaKv', (this.info.nLayer + 1) * TMAX * this.deaRowWidth);
      f('deaMix', TMAX * (3 * DEA_QK + C));
      f('deaParts', DEA_SPLIT_WORKGROUPS * (C + 2));
      this.growRows(Math.min(this.maxStateRows, DEA_FIRST_ROWS));
    }
    f('state', this.slots * this.stateSize);
    f('stateTmp', this.stateSize);
    for (let l = 0; l < this.info.nLayer; l++) {
      const u = createBuffer(device, `layer${l}`, 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      const base = l * this.layerStride;
      device.queue.writeBuffer(u, 0, new Uint32Array([base, base + C, base + this.layerStride - C, l]));
      this.layerUniforms.push(u);
    }
  }

  /** RWKV-7b: floats of one cached row of one layer (K then V). */
  private get deaRowWidth(): number {
    return DEA_QK + this.C;
  }

  /**
   * RWKV-7b: room for `rows` rows in every slot's cache. New buffers of twice the rows (at least `rows`, at most
   * the context limit) take over the rows held so far; the copies are queued after every call submitted before
   * and ahead of every one after, so both see their rows. Passes recorded on the old buffers are dropped.
   */
  private growRows(rows: number) {
    if (rows <= this.deaCap) return;
    this.resizeRows(Math.min(this.maxStateRows, Math.max(rows, 2 * this.deaCap)));
  }

  /** RWKV-7b: every layer's row buffer replaced by one of `cap` rows a slot, each slot's rows (up to `cap`) copied over. */
  private resizeRows(cap: number) {
    const rowBytes = this.deaRowWidth * 4;
    const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    const resized = this.weights.layers.map((_, l) => createBuffer(this.device, `deaRows${l}`, this.slots * cap * rowBytes, S));
    if (this.deaRows.length) {
      const enc = this.device.createCommandEncoder();
      for (let l = 0; l < resized.length; l++)
        for (let s = 0; s < this.slots; s++) {
          const n = Math.min(this.rowCounts[s], this.deaCap, cap);
          if (n > 0) enc.copyBufferToBuffer(this.deaRows[l], s * this.deaCap * rowBytes, resized[l], s * cap * rowBytes, n * rowBytes);
        }
      this.device.queue.submit([enc.finish()]);
      for (const b of this.deaRows) b.destroy();
    }
    this.deaRows = resized;
    this.deaCap = cap;
    for (const k of this.deaGroupKeys) this.groups.delete(k);
    this.deaGroupKeys.clear();
    this.recorded.clear();
  }

  /**
   * RWKV-7b, after a slot's rows went down (reset, or a shorter state written or copied over it): once the calls
   * made before have run, when the longest slot fits a quarter of the buffers, they shrink to what growing from the
   * first rows would have given it, so a long context that is gone stops holding every slot's share of its memory.
   * (A quarter, not a half: a context that keeps coming back to one size does not reallocate at every reset.)
   * Queued behind the earlier calls, which may still write rows past the new size; the calls after it see the new size.
   */
  private shrinkRowsLater() {
    if (this.shrinkPending) return;
    this.shrinkPending = true;
    void this.serialize(async () => {
      this.shrinkPending = false;
      const longest = Math.max(...this.rowCounts);
      let cap = Math.min(this.maxStateRows, DEA_FIRST_ROWS);
      while (cap < longest) cap = Math.min(this.maxStateRows, 2 * cap);
      if (4 * cap <= this.deaCap) this.resizeRows(cap);
      // The copy scratch holds one layer of the longest slot copied so far; copyState makes it again when needed.
      this.rowsTmp?.destroy();
      this.rowsTmp = null;
    }).catch(() => undefined); // a broken device is reported by the calls themselves
  }

  /** Floats of one layer's region in the RWKV-7a scratch `se`. */
  private get deepEmbedRegion(): number {
    return this.TMAX * DEEP_EMBED_ROW;
  }

  /**
   * The WKV variant of a sub-pass of `tokens` tokens in `jobs` jobs whose longest has `longest`: the forced one or
   * the device's choice, except that a chunked one whose chunks would not fit its scratch gives way to the choice
   * without it (only a batch of many short jobs beside a long one gets there).
   */
  private wkvFor(longest: number, tokens: number, jobs: number): WkvVariant {
    const v = this.wkvForced ?? chooseWkv(longest, this.wkvFacts);
    if (v.kind !== 'chunk' || wkvMaxChunks(v.tokens, tokens, jobs) <= this.wkvChunkCapacity(v.tokens)) return v;
    return chooseWkv(longest, this.wkvFacts, false);
  }

  /** Chunks of T tokens the chunked WKV's scratch holds: a prefill of TMAX tokens in up to WKV_CHUNK_JOBS jobs. */
  private wkvChunkCapacity(T: number): number {
    return wkvMaxChunks(T, this.TMAX, WKV_CHUNK_JOBS);
  }

  /**
   * The chunked WKV's scratch for its chunk length (both row-sum forms share it), made on first use, sized for
   * wkvChunkCapacity chunks. Every way here (chooseWkv, the wkvVariant setter) went through wkvUnsupported with
   * this.wkvFacts.batch, the same size against the device's binding limit, so a scratch too large is refused there.
   */
  private wkvScratch(v: Extract<WkvVariant, { kind: 'chunk' }>): GPUBuffer {
    let b = this.wkvScratchBuffers.get(v.tokens);
    if (!b) {
      const N = this.wkvFacts.headSize;
      const bytes = wkvScratchFloats(v, this.C / N, N, this.TMAX, WKV_CHUNK_JOBS) * 4;
      b = createBuffer(this.device, `wkvChunks${v.tokens}`, bytes, GPUBufferUsage.STORAGE);
      this.wkvScratchBuffers.set(v.tokens, b);
    }
    return b;
  }

  private kernel(key: string, make: () => Kernel): Kernel {
    let k = this.kernels.get(key);
    if (!k) this.kernels.set(key, (k = make()));
    return k;
  }

  private group(key: string, kernel: Kernel, res: BufferRange[]): GPUBindGroup {
    return this.groups.get(key, kernel, res);
  }

  /** Weight access of the non-matrix kernels (the embedding, f16 or f32 whatever the precision): native f16 where the device has it. */
  private get wprelude() {
    if (this.weights.emb.format === 'f32') return 'weights_f32';
    return this.gpu.kernelPath === 'f32' ? 'weights_f16' : 'weights_f16_native';
  }

  // ---- kernels ------------------------------------------------------------------------------------------

  /** The uniform describing a matrix group at one use site (matmul.ts), made once per use site. */
  private groupUniform(key: string, g: MatrixGroup, io: SegmentIO[], useR: boolean): { buffer: GPUBuffer; virtualRows: number } {
    let u = this.matUniforms.get(key);
    if (!u) {
      const { words, virtualRows } = groupUniform(key, g, io, useR);
      const buffer = createBuffer(this.device, `group:${key}`, words.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      this.device.queue.writeBuffer(buffer, 0, words);
      u = { buffer, virtualRows };
      this.matUniforms.set(key, u);
    }
    return u;
  }

  /** The kernels this runtime's products and WKV recurrence run, as one line (`rwkv-flow info`, benchmark records). */
  get kernelPath(): string {
    const partly = quantLayersNote(this.weights, this.info.nLayer);
    return `${describeKernels(this.matmulConfig)}${this.blocksAheadNote}${partly ? `; quantised layers${partly}` : ''}; ${this.wkvPath}`;
  }

  /** The WKV kernel forced for every batch (tests, benchmarks), or null: chosen per sub-pass (wkv.ts). */
  get wkvVariant(): WkvVariant | null {
    return this.wkvForced;
  }

  set wkvVariant(v: WkvVariant | null) {
    const why = v && wkvUnsupported(v, this.wkvFacts);
    if (v && why) throw new Error(`WKV kernel ${wkvVariantName(v)} cannot run here: ${why}`);
    this.wkvForced = v;
  }

  /** Which kernels write the tiled products' f16 blocks ahead of them (normTiles, productBlocks), for kernelPath. */
  private get blocksAheadNote(): string {
    if (this.tiled === null) return '';
    const by = [this.normTiles && 'the norms (RWKV_NORM_TILES=off: not)', this.productBlocks && 'the products before them (RWKV_PRODUCT_BLOCKS=off: not)'].filter(Boolean);
    return by.length ? `; tiled products' f16 blocks written by ${by.join(' and ')} where they read those results whole` : '';
  }

  /** The WKV kernels this runtime runs, as one line. */
  get wkvPath(): string {
    return describeWkv(this.wkvFacts, this.wkvForced);
  }

  private get matmulConfig() {
    const { kernelPath, subgroup32 } = this.gpu;
    return { kernelPath, subgroup32, precision: this.weights.precision, vecMaxRows: this.vecMaxRows, gemmTile: this.gemmTile, splitK: this.splitK, staged: this.staged, tiled: this.tiled, blocks: this.weightBlocks };
  }

  /** The kernel configuration of one group: the group's own storage (int8 models keep f16 LoRA groups). */
  private matmulConfigOf(g: MatrixGroup) {
    return { ...this.matmulConfig, precision: g.format, layout: g.layout };
  }

  /** The kernel a group's product takes over `rows` rows, with its configuration, group uniform and input widths. */
  private productChoice(key: string, g: MatrixGroup, io: SegmentIO[], rows: number, useR: boolean) {
    const config = this.matmulConfigOf(g);
    const u = this.groupUniform(key, g, io, useR);
    const ks = g.segs.map((s) => s.k);
    const shape = {
      k: Math.max(...ks), virtualRows: u.virtualRows, scratchFloats: this.splitScratchFloats, tileable: this.tiled !== null && tileableGroup(g),
      wideOutputs: g.segs.every((s) => s.n % WIDE_TILE === 0),
    };
    return { config, u, ks, variant: chooseMatmul(rows, config, shape) };
  }

  /**
   * Where the norm kernel before product `key` (the layer norm + token shift, ln_shift_tiles.wgsl, or the time mix's
   * group norm, post_tiles.wgsl) may write that product's f16 blocks: the mix each of its segments reads (of `mixes`
   * C-wide regions at xOff = m · TMAX · C) and the product's token tiles, or null where the product is not tiled over
   * `rows` rows, a segment reads something other than a whole region, or normTiles is off.
   */
  private normTilesFor(key: string, g: MatrixGroup, io: SegmentIO[], rows: number, mixes: number): NormTiles | null {
    if (!this.normTiles) return null;
    const { variant } = this.productChoice(key, g, io, rows, false);
    if (variant.kind !== 'sgtile') return null;
    const REG = this.TMAX * this.C;
    const segMix = io.map((s) => s.xOff / REG);
    if (g.segs.some((s) => s.k !== this.C) || segMix.some((m) => !Number.isInteger(m) || m < 0 || m >= mixes)) return null;
    return { segMix, tileTokens: tileTokensOf(variant) };
  }

  /**
   * Where the norm that writes `first`'s blocks can also write those of group `next`, which reads the same mixes: right
   * after them in tiledInputs, which `next` then binds from that offset (its segments' blocks start at 0 there). Null
   * where `next` is not tiled alike, the buffer has no room for both, or the offset breaks the device's alignment.
   */
  private normTilesAfter(first: NormTiles | null, next: { key: string; g: MatrixGroup; io: SegmentIO[] }, rows: number): { tiles: NormTiles; range: BufferRange } | null {
    if (!first) return null;
    const tiles = this.normTilesFor(next.key, next.g, next.io, rows, 6);
    if (!tiles || tiles.tileTokens !== first.tileTokens) return null;
    const padded = normRows(rows, first);
    const offset = first.segMix.length * padded * this.C * 2;
    const size = tiles.segMix.length * padded * this.C * 2;
    if (offset + size > this.tiledInputHalves * 2 || offset % this.device.limits.minStorageBufferOffsetAlignment !== 0) return null;
    return { tiles, range: { buffer: this.buf.tiledInputs, offset, size } };
  }

  /**
   * Whether product `a` (over `rows` rows) stores the f16 blocks of product `b` after it (productBlocks): both tiled
   * with the same token tiles, b's segment i reading a's segment i whole (k_i = n_i, in multiples of 16), and a's
   * results not accumulated into anything. Returns b's token tiles, or 0.
   */
  private productBlocksFor(a: { key: string; g: MatrixGroup; io: SegmentIO[] }, b: { key: string; g: MatrixGroup; io: SegmentIO[] }, rows: number): number {
    if (!this.productBlocks || this.tiled === null) return 0;
    const va = this.productChoice(a.key, a.g, a.io, rows, false).variant;
    const vb = this.productChoice(b.key, b.g, b.io, rows, false).variant;
    if (va.kind !== 'sgtile' || vb.kind !== 'sgtile' || tileTokensOf(va) !== tileTokensOf(vb)) return 0;
    // Unsplit, the product's own workgroups write the blocks: their token tiles must reach the padded rows.
    if (splitOf(va) === 1 && 16 * va.mt * va.sgm !== tileTokensOf(va)) return 0;
    const segs = a.g.segs;
    if (segs.length !== b.g.segs.length || a.io.some((s) => s.accum) || segs.some((s, i) => s.n % 16 !== 0 || b.g.segs[i].k !== s.n)) return 0;
    return tileTokensOf(vb);
  }

  /**
   * y_s = act_s(W_s x_s) (+ y_s) for every matrix s of the group, over `rows` rows. `preTiled`: a tiled product's f16
   * blocks were written before it, by the norm kernel (normTiles) or, in `blocks.from`, by the product before it, so
   * its tiling pass is left out. `blocks.out`: the product stores its results there as the next product's f16 blocks.
   */
  private matmul(
    pass: Recorder,
    key: string,
    g: MatrixGroup,
    x: GPUBuffer,
    y: GPUBuffer,
    rows: number,
    io: SegmentIO[],
    useR = false,
    preTiled: Pick<NormTiles, 'tileTokens'> | null = null,
    blocks: { from?: BufferRange; out?: GPUBuffer } = {},
  ) {
    const { config, u, ks, variant: chosen } = this.productChoice(key, g, io, rows, useR);
    if (blocks.out && chosen.kind !== 'sgtile') throw new Error(`product ${key}: only a tiled product stores f16 blocks`);
    const variant = blocks.out && chosen.kind === 'sgtile' ? { ...chosen, blocksOut: true } : chosen;
    const shader = matmulShader(variant, config);
    const k = this.kernel(shader.key, () => makeKernel(this.device, shader.parts, shader.constants, shader.bindings));
    const reduce = reducesAfter(variant);
    const tiledProduct = variant.kind === 'sgtile';
    // Tiled products declare the partial sums (binding 5) whether or not they are split.
    // Binding 7, the next product's blocks: the unsplit product's, or the reduction pass's of a split one.
    const base = [this.buf.batch, g.buffer, x, y, u.buffer, ...(reduce || tiledProduct ? [this.buf.splitParts] : []), ...(tiledProduct ? [blocks.from ?? this.buf.tiledInputs] : [])];
    const resources = blocks.out && !reduce ? [...base, blocks.out] : base;
    const label = `${shader.key.split(':')[0]}:${key.replace(/^L\d+:/, '')}`;
    if (preTiled && (!tiledProduct || preTiled.tileTokens !== tileTokensOf(variant)))
      throw new Error(`product ${key}: its norm wrote f16 blocks of ${preTiled.tileTokens} tokens for a ${shader.key} product`);
    if (tiledProduct && !preTiled) {
      // First the inputs as f16 16×16 blocks (tokens past the batch as zeros), which the product reads.
      const tokens = tileTokensOf(variant);
      const t = tileInputShader(tokens);
      const tk = this.kernel(t.key, () => makeKernel(this.device, t.parts, t.constants, t.bindings));
      pass.setPipeline(tk.pipeline);
      // Its bindings are the product's but the output blocks (binding 7) of a product storing f16 blocks.
      pass.setBindGroup(0, this.group(`${t.key}:${key}`, tk, base));
      pass.label(`${label}:tile`);
      pass.dispatchWorkgroups(...tileInputDispatch(ks, rows, tokens));
    }
    pass.setPipeline(k.pipeline);
    pass.setBindGroup(0, this.group(`${shader.key}:${key}${fromKey(blocks.from)}`, k, resources));
    pass.label(label);
    pass.dispatchWorkgroups(...matmulDispatch(variant, u.virtualRows, rows));
    if (!reduce) return;
    const rs = splitReduceShader(variant, config, rows);
    const r = this.kernel(rs.key, () => makeKernel(this.device, rs.parts, rs.constants, rs.bindings));
    pass.setPipeline(r.pipeline);
    pass.setBindGroup(0, this.group(`${rs.key}:${key}${fromKey(blocks.from)}`, r, blocks.out ? [...base, blocks.out] : base));
    pass.label(`${label}:reduce`);
    pass.dispatchWorkgroups(...splitReduceDispatch(u.virtualRows, rows, blocks.out && variant.kind === 'sgtile' ? tileTokensOf(variant) : 0));
  }

  private get consts() {
    return {
      C: this.C,
      N: this.info.headSize,
      TMAX: this.TMAX,
      STATE: this.stateSize,
    };
  }

  // ---- the forward pass ---------------------------------------------------------------------------------

  /**
   * The recorded commands of a sub-pass. They depend only on the batch shape (tokens, jobs, output rows), so they
   * are recorded once per shape and replayed: per-step encoding is then a bare loop of native calls.
   */
  private opsFor(sp: SubPass): Op[] {
    // Decode and prefill want different WKV kernels; the longest job of the sub-pass decides.
    const longest = sp.segments.reduce((m, s) => Math.max(m, s.to - s.from), 0);
    const wkv = this.wkvFor(longest, sp.tokens, sp.segments.length);
    const key = `${sp.tokens},${sp.segments.length},${sp.rows},${this.vecMaxRows},${this.gemmTile},${this.fuseDecodeJobs},${wkvVariantName(wkv)},${this.lnSplit},${this.normTiles},${this.productBlocks},${this.tmixLoraLoads},${this.tmixLanes},${this.submitSchedule.firstSubmitLayers}/${this.submitSchedule.layersPerSubmit}`;
    let ops = this.recorded.get(key);
    if (!ops) {
      ops = this.record(sp.tokens, sp.segments.length, sp.rows, wkv);
      if (this.recorded.size >= 64) this.recorded.delete(this.recorded.keys().next().value!);
      this.recorded.set(key, ops);
    }
    return ops;
  }

  /**
   * Sends a sub-pass's commands to the GPU: every stretch but the last is submitted here (taken from those encoded
   * ahead during the previous call when it ran the same ops, encoded-ahead.ts), the last is returned in `before`, to
   * be submitted with `enc`, which the caller fills with the call's own copies.
   */
  private encodeSubPass(ops: Op[]): { before: GPUCommandBuffer | null; enc: GPUCommandEncoder } {
    const enc = this.device.createCommandEncoder();
    if (this.profiler) return { before: null, enc: this.encodeProfiled(enc, ops, this.profiler) };
    if (this.stepSpan) return { before: null, enc: this.encodeSpanned(enc, ops, this.stepSpan) };
    return { before: this.ahead.submitAllButLast(this.device, ops), enc };
  }

  /**
   * Spanned (benchmarks): the first pass writes the begin timestamp, an empty pass at the end the end one, and the
   * dispatches the span leaves out are skipped; early submits stay where they are.
   */
  private encodeSpanned(enc: GPUCommandEncoder, ops: Op[], span: StepSpan): GPUCommandEncoder {
    const stamps = span.nextPass();
    let pass = enc.beginComputePass(stamps ? { timestampWrites: { querySet: stamps.querySet, beginningOfPassWriteIndex: stamps.beginningOfPassWriteIndex } } : {});
    let pipeline: GPUComputePipeline | null = null;
    for (const op of ops) {
      if (op === 'submit') {
        pass.end();
        this.device.queue.submit([enc.finish()]);
        enc = this.device.createCommandEncoder();
        pass = enc.beginComputePass();
        pipeline = null;
        continue;
      }
      if (!span.keeps(op.label)) continue;
      if (op.pipeline !== pipeline) pass.setPipeline((pipeline = op.pipeline));
      pass.setBindGroup(0, op.group);
      pass.dispatchWorkgroups(op.x, op.y, op.z);
    }
    pass.end();
    if (stamps) enc.beginComputePass({ timestampWrites: { querySet: stamps.querySet, endOfPassWriteIndex: stamps.endOfPassWriteIndex } }).end();
    return enc;
  }

  /**
   * Each dispatch in a pass of its own, timed by the profiler (one command buffer: no early submits). With
   * profiler.repeat > 1 each is dispatched that many times in its pass (the profiler divides): a product's later
   * copies find its weights in L2, which tells a kernel's own speed from how its weights arrive. Accumulating
   * products then add more than once: a profile, not a result.
   */
  private encodeProfiled(enc: GPUCommandEncoder, ops: Op[], profiler: KernelProfiler): GPUCommandEncoder {
    for (const op of ops) {
      if (op === 'submit') continue;
      const timestampWrites = profiler.passFor(op.label);
      const pass = enc.beginComputePass(timestampWrites ? { timestampWrites } : {});
      pass.setPipeline(op.pipeline);
      pass.setBindGroup(0, op.group);
      for (let r = 0; r < profiler.repeat; r++) pass.dispatchWorkgroups(op.x, op.y, op.z);
      pass.end();
    }
    return enc;
  }

  private record(T: number, J: number, R: number, wkvVariant: WkvVariant): Op[] {
    const { device, C, TMAX, weights, buf } = this;
    const H = this.info.nHead;
    const cs = this.consts;
    const REG = TMAX * C;
    const LREG = TMAX * weights.maxLora;
    const pass = new Recorder();

    const emb = this.kernel('embed', () =>
      makeKernel(device, [this.wprelude, 'embed'], { C }, ['uniform', 'read', 'read', 'rw']),
    );
    pass.setPipeline(emb.pipeline);
    pass.setBindGroup(0, this.group('embed', emb, [buf.batch, weights.emb.buffer, buf.ids, buf.x]));
    pass.dispatchWorkgroups(Math.ceil(C / 8 / 64), T);

    // RWKV-7a: while x still holds the tokens' normalized embeddings, their e·s_emb_xᵀ for every layer's gate.
    const de = weights.deepEmbed;
    const seAt = (l: number) => l * this.deepEmbedRegion;
    for (const { group, firstLayer } of de?.sx ?? []) {
      this.matmul(pass, `de:sx${firstLayer}`, group, buf.x, buf.se, T, group.segs.map((_, i) => ({ xOff: 0, yOff: seAt(firstLayer + i) })));
    }
    // RWKV-7b: the same for the DEA tables' e·k_emb_xᵀ and e·v_emb_xᵀ, into deaKv after its k, v regions.
    const dea = weights.dea;
    const QK = DEA_QK;
    const RW = this.deaRowWidth;
    const deaEAt = (l: number) => (1 + l) * TMAX * RW;
    dea?.forEach((d, l) => {
      this.matmul(pass, `dea:embX${l}`, d.embX, buf.x, buf.deaKv, T, [{ xOff: 0, yOff: deaEAt(l) }, { xOff: 0, yOff: deaEAt(l) + TMAX * QK }]);
    });
    const deaConsts = { C, TMAX, STATE: this.stateSize, CAP: this.deaCap };
    const deaRowsKernel = () =>
      this.kernel(`deaRows:${this.deaCap}`, () =>
        makeKernel(device, [this.wprelude, 'rwkv7b_dea_rows'], { ...deaConsts, VOFF: dea![0].tables.segs[1].wOff }, [
          'uniform', 'read', 'uniform', 'read', 'read', 'read', 'read', 'read', 'read', 'rw', 'rw',
        ]),
      );
    // Ranges of rows each token's attention is split over (1: not split), fixed per recorded shape and cache size.
    const deaSplit = Math.max(1, Math.min(Math.ceil(this.deaCap / 256), Math.floor(DEA_SPLIT_WORKGROUPS / T)));
    const deaAttendKernel = () =>
      this.kernel(`deaAttend:${this.deaCap}:${deaSplit > 1}`, () =>
        makeKernel(device, ['rwkv7b_dea_attend'], { ...deaConsts, SPLIT: deaSplit > 1 }, ['uniform', 'uniform', 'read', 'read', 'read', 'rw', 'rw', 'rw']),
      );
    const deaCombineKernel = () =>
      this.kernel(`deaCombine:${deaSplit}`, () => makeKernel(device, ['rwkv7b_dea_combine'], { C, S: deaSplit }, ['uniform', 'read', 'rw']));
    /** RWKV-7b, before the time mix changes x: q, kc, vc; then k, tanh(v); then each token's cache row and query. */
    const deaRows = (key: string, l: number) => {
      const d = dea![l];
      this.matmul(pass, `${key}:dea:proj`, d.proj, buf.x, buf.deaProj, T, [
        { xOff: 0, yOff: 0 }, { xOff: 0, yOff: TMAX * QK }, { xOff: 0, yOff: TMAX * (QK + 32) },
      ]);
      this.matmul(pass, `${key}:dea:expand`, d.expand, buf.deaProj, buf.deaKv, T, [
        { xOff: TMAX * QK, yOff: 0 }, { xOff: TMAX * (QK + 32), yOff: TMAX * QK, act: 1 },
      ]);
      const k = deaRowsKernel();
      const gk = `${key}:deaRows:${this.deaCap}`;
      this.deaGroupKeys.add(gk);
      pass.setPipeline(k.pipeline);
      pass.setBindGroup(0, this.group(gk, k, [
        buf.batch, d.tables.buffer, this.layerUniforms[l], buf.ids, buf.jobs, buf.deaProj, buf.deaKv, d.vecs, buf.state, this.deaRows[l], buf.deaMix,
      ]));
      pass.dispatchWorkgroups(T);
    };
    /** RWKV-7b, after the time mix's output was added: x += the attention over each token's cached rows. */
    const deaAttend = (key: string, l: number) => {
      const k = deaAttendKernel();
      const gk = `${key}:deaAttend:${this.deaCap}:${deaSplit > 1}`;
      this.deaGroupKeys.add(gk);
      pass.setPipeline(k.pipeline);
      pass.setBindGroup(0, this.group(gk, k, [buf.batch, this.layerUniforms[l], buf.jobs, buf.deaMix, this.deaRows[l], buf.x, buf.state, buf.deaParts]));
      pass.dispatchWorkgroups(T, deaSplit);
      if (deaSplit === 1) return;
      const c = deaCombineKernel();
      pass.setPipeline(c.pipeline);
      pass.setBindGroup(0, this.group(`deaCombine:${deaSplit}`, c, [buf.batch, buf.deaParts, buf.x]));
      pass.dispatchWorkgroups(T);
    };
    const gate = () =>
      this.kernel('deepEmbedGate', () =>
        makeKernel(device, [this.wprelude, 'rwkv7a_gate'], { C, F: this.F }, ['uniform', 'read', 'read', 'read', 'read', 'read', 'rw']),
      );

    // A step where every job has one token stores the shift state inside the norm kernel (ln_shift.wgsl, SAVE).
    const fusedSave = T === J;
    const lnSplit = this.lnSplit ?? lnShiftSplit(T, C);
    // keepRows: the f32 mixes too, for a product that does not take the blocks.
    const lnShift = (ffn: boolean, tiles: NormTiles | null, keepRows: boolean) =>
      this.kernel(`lnShift${ffn},${fusedSave},${lnSplit}${tiles ? `,tiles${tiles.segMix.join('.')}@${tiles.tileTokens}${keepRows ? '' : ',blocks only'}` : ''}`, () => {
        const more: Record<string, ShaderConstant> = tiles ? { TILE_TOKENS: tiles.tileTokens, TILE_WRITES: normTileWrites(tiles.segMix), WRITE_ROWS: keepRows } : {};
        return makeKernel(
          device,
          ...withWgSum(this.gpu, ['wg_sum', ...(tiles ? ['block_layout', 'ln_shift_tiles'] : ['ln_shift_no_tiles']), 'ln_shift'], { ...cs, WG: 256, M: ffn ? 1 : 6, FFN: ffn, SAVE: fusedSave, SPLIT: lnSplit, ...more }),
          ['uniform', 'uniform', 'read', 'read', 'read', 'rw', 'read', 'rw', 'rw', ...(tiles ? (['rw'] as const) : [])],
        );
      });
    const save = (ffn: boolean) =>
      this.kernel(`save${ffn}`, () =>
        makeKernel(device, ['save_shift'], { ...cs, FFN: ffn }, ['uniform', 'uniform', 'read', 'read', 'rw']),
      );
    const prep = (first: boolean) =>
      this.kernel(`prep${first}`, () =>
        makeKernel(device, ...withWgSum(this.gpu, ['wg_sum', 'head_common', 'rwkv7_prep'], { ...cs, WG: cs.N, FIRST: first }), ['uniform', 'rw', 'rw', 'read']),
      );
    const wkvName = wkvVariantName(wkvVariant);
    // One dispatch, or two for the chunked variant (with its scratch at binding 5).
    const wkvSteps = wkvPasses(wkvVariant, cs, !this.wkvFacts.cpuDriver).map((p, i) => ({
      kernel: this.kernel(`wkv:${wkvName}:${i}`, () => makeKernel(device, p.parts, p.constants, p.bindings)),
      scratch: p.scratch,
      workgroups: p.dispatch(H, J, T),
    }));
    const wkvScratch = wkvVariant.kind === 'chunk' ? this.wkvScratch(wkvVariant) : null;
    // The time mix's group norm; with `tiles` it also writes the output product's f16 blocks (shaders/post_tiles.wgsl).
    const post = (tiles: NormTiles | null) =>
      this.kernel(`post${tiles ? ',tiles' : ''}`, () =>
        makeKernel(
          device,
          ...withWgSum(this.gpu, ['wg_sum', 'head_common', ...(tiles ? ['block_layout', 'post_tiles'] : ['post_no_tiles']), 'rwkv7_post'], { ...cs, WG: cs.N }),
          ['uniform', 'read', 'read', 'rw', ...(tiles ? (['rw'] as const) : [])],
        ),
      );
    /** Layer norm + token shift into `mix`, and the slots' last normalized tokens saved as shift state. */
    const normShift = (key: string, ffn: boolean, l: number, ln: GPUBuffer, mixW: GPUBuffer, tiles: NormTiles | null = null, keepRows = true) => {
      const k = lnShift(ffn, tiles, keepRows || !tiles);
      pass.setPipeline(k.pipeline);
      pass.setBindGroup(
        0,
        this.group(`${key}:${fusedSave}${tiles ? ':tiles' : ''}`, k, [buf.batch, this.layerUniforms[l], buf.tok, buf.x, ln, buf.state, mixW, buf.xn, buf.mix, ...(tiles ? [buf.tiledInputs] : [])]),
      );
      pass.dispatchWorkgroups(normRows(T, tiles), lnSplit);
      if (fusedSave) return;
      const s = save(ffn);
      pass.setPipeline(s.pipeline);
      pass.setBindGroup(0, this.group(`${key}:save`, s, [buf.batch, this.layerUniforms[l], buf.jobs, buf.xn, buf.state]));
      pass.dispatchWorkgroups(Math.ceil(C / 64), J);
    };

    // Mix regions: 0 r, 1 w, 2 k, 3 v, 4 a, 5 g. Time-mix regions (head_common.wgsl): 0 r, 1 w, 2 k, 3 v, 4 a,
    // 5 g, 6 kk, 7 y, 8 v LoRA. LoRA hidden regions: 0 w, 1 a, 2 g, 3 v.
    const mixAt = (m: number) => m * REG;
    const tmAt = (m: number) => m * REG;
    const loraIn = [1, 4, 5, 3];
    const loraAct = [1, 0, 2, 0];
    const loraOut = [1, 4, 5, 8];
    // Submitting every few layers lets the GPU start while the rest is still being encoded.
    const { firstSubmitLayers, layersPerSubmit } = this.submitSchedule;
    const submitsAfter = (l: number) => l + 1 === firstSubmitLayers || (l + 1 > firstSubmitLayers && (l + 1 - firstSubmitLayers) % layersPerSubmit === 0);
    // The output product adds the time mix's results (xx) into the residual stream.
    const oIO: SegmentIO[] = [{ xOff: 0, yOff: 0, accum: true }];
    /** prep, the WKV recurrence, post and the output product: the time mix after its LoRAs. */
    const unfusedTimeMix = (key: string, l: number, L: ModelWeights['layers'][number]) => {
      const pk = prep(l === 0);
      pass.setPipeline(pk.pipeline);
      pass.setBindGroup(0, this.group(`${key}:prep`, pk, [buf.batch, buf.tm, buf.vfirst, L.prep]));
      pass.dispatchWorkgroups(H, T);
      wkvSteps.forEach((w, i) => {
        pass.setPipeline(w.kernel.pipeline);
        const bound = [buf.batch, this.layerUniforms[l], buf.jobs, buf.tm, buf.state, ...(w.scratch ? [wkvScratch!] : [])];
        pass.setBindGroup(0, this.group(`${key}:wkv:${wkvName}:${i}`, w.kernel, bound));
        // One profiler label for every variant, so profiles compare; the chunked variant's first pass apart.
        pass.label(i + 1 < wkvSteps.length ? 'rwkv7_wkv_prep' : 'rwkv7_wkv');
        pass.dispatchWorkgroups(w.workgroups[0], w.workgroups[1]);
      });
      // The output product reads the group norm's results whole: where it is tiled, the norm writes its blocks.
      const oTiles = this.normTilesFor(`${key}:o`, L.o, oIO, T, 1);
      const pk2 = post(oTiles);
      pass.setPipeline(pk2.pipeline);
      pass.setBindGroup(0, this.group(`${key}:post${oTiles ? ':tiles' : ''}`, pk2, [buf.batch, buf.tm, L.post, buf.xx, ...(oTiles ? [buf.tiledInputs] : [])]));
      pass.dispatchWorkgroups(H, normRows(T, oTiles));
      this.matmul(pass, `${key}:o`, L.o, buf.xx, buf.x, T, oIO, false, oTiles);
    };
    const fuseLanes = this.decodeFuseLanes(T, J);
    // A fused decode step's first LoRA outputs go to tm from HID on, where the fused kernel reads them.
    const HID = 9 * REG;
    const rkvIO: SegmentIO[] = [0, 2, 3].map((m) => ({ xOff: mixAt(m), yOff: tmAt(m) }));
    weights.layers.forEach((L, l) => {
      const key = `L${l}`;
      if (dea) deaRows(key, l);
      // The product that reads the norm's mixes first takes its f16 blocks from the norm kernel (norm-tiles.ts).
      const lora1IO = L.lora1.segs.map((_, i) => ({ xOff: mixAt(loraIn[i]), yOff: HID + i * LREG, act: loraAct[i] }));
      const attFirst = fuseLanes && L.rkvLora1 ? { key: `${key}:rkv+lora1`, g: L.rkvLora1, io: [...rkvIO, ...lora1IO] } : { key: `${key}:rkv`, g: L.rkv, io: rkvIO };
      const attTiles = this.normTilesFor(attFirst.key, attFirst.g, attFirst.io, T, 6);
      // Unfused, the first LoRA stages are a group of their own reading the same mixes: the norm writes their blocks
      // too, after the r/k/v group's in the same buffer, and they bind that buffer from there (normTilesAfter).
      const lora1 = { key: `${key}:lora1`, g: L.lora1, io: L.lora1.segs.map((_, i) => ({ xOff: mixAt(loraIn[i]), yOff: i * LREG, act: loraAct[i] })) };
      const lora1Tiles = fuseLanes ? null : this.normTilesAfter(attTiles, lora1, T);
      // The f32 mixes only where a product reads them: fused, the first LoRA stages apart from the r/k/v group; unfused,
      // those stages without blocks of their own.
      const attRowsRead = fuseLanes ? !L.rkvLora1 : !lora1Tiles;
      normShift(`${key}:ln1`, false, l, L.ln1, L.attMix, lora1Tiles ? { ...attTiles!, segMix: [...attTiles!.segMix, ...lora1Tiles.tiles.segMix] } : attTiles, attRowsRead);
      if (fuseLanes) {
        if (L.rkvLora1) this.matmul(pass, attFirst.key, L.rkvLora1, buf.mix, buf.tm, T, attFirst.io, false, attTiles);
        else {
          this.matmul(pass, `${key}:rkv`, L.rkv, buf.mix, buf.tm, T, rkvIO, false, attTiles);
          this.matmul(pass, `${key}:lora1>tm`, L.lora1, buf.mix, buf.tm, T, lora1IO);
        }
        // The fused kernel writes the output product's blocks too where it is tiled and the device binds a ninth storage
        // buffer in one stage (WebGPU's default is 8, what the kernel has without them).
        const oTiles = this.device.limits.maxStorageBuffersPerShaderStage > 8 ? this.normTilesFor(`${key}:o`, L.o, oIO, T, 1) : null;
        this.fusedTimeMix(pass, key, l, J, L, fuseLanes, HID, LREG, oTiles);
        this.matmul(pass, `${key}:o`, L.o, buf.xx, buf.x, T, oIO, false, oTiles);
      } else {
        this.matmul(pass, `${key}:rkv`, L.rkv, buf.mix, buf.tm, T, rkvIO, false, attTiles);
        const lora2 = { key: `${key}:lora2`, g: L.lora2, io: L.lora2.segs.map((_, i) => ({ xOff: i * LREG, yOff: tmAt(loraOut[i]) })) };
        // The first stages' results straight into the second's f16 blocks, where both are tiled (productBlocksFor).
        const lora2Tokens = this.productBlocksFor(lora1, lora2, T);
        this.matmul(pass, lora1.key, L.lora1, buf.mix, buf.lora, T, lora1.io, false, lora1Tiles?.tiles ?? null, {
          ...(lora1Tiles ? { from: lora1Tiles.range } : {}),
          ...(lora2Tokens ? { out: buf.nextBlocks } : {}),
        });
        this.matmul(pass, lora2.key, L.lora2, buf.lora, buf.tm, T, lora2.io, false, lora2Tokens ? { tileTokens: lora2Tokens } : null, lora2Tokens ? { from: buf.nextBlocks } : {});
        unfusedTimeMix(key, l, L);
      }

      if (dea) deaAttend(key, l);
      const fkIO: SegmentIO[] = [{ xOff: 0, yOff: 0, act: 3 }];
      const fvIO: SegmentIO[] = [{ xOff: 0, yOff: 0, accum: true }];
      const ffnTiles = this.normTilesFor(`${key}:fk`, L.ffnK, fkIO, T, 1);
      // The FFN key's results straight into the value's f16 blocks, where both are tiled (productBlocksFor); not
      // RWKV-7a's, whose gate rewrites the key's rows in between.
      const fvTokens = de ? 0 : this.productBlocksFor({ key: `${key}:fk`, g: L.ffnK, io: fkIO }, { key: `${key}:fv`, g: L.ffnV, io: fvIO }, T);
      normShift(`${key}:ln2`, true, l, L.ln2, L.ffnMix, ffnTiles, false);
      this.matmul(pass, `${key}:fk`, L.ffnK, buf.mix, buf.ffk, T, fkIO, false, ffnTiles, fvTokens ? { out: buf.nextBlocks } : {});
      if (de) {
        const g = gate();
        const se = { buffer: buf.se, offset: seAt(l) * 4, size: this.deepEmbedRegion * 4 };
        pass.setPipeline(g.pipeline);
        pass.setBindGroup(0, this.group(`${key}:gate`, g, [buf.batch, de.layers[l].table, buf.ids, buf.xn, se, de.layers[l].gate, buf.ffk]));
        pass.dispatchWorkgroups(T);
      }
      this.matmul(pass, `${key}:fv`, L.ffnV, buf.ffk, buf.x, T, fvIO, false, fvTokens ? { tileTokens: fvTokens } : null, fvTokens ? { from: buf.nextBlocks } : {});
      if (submitsAfter(l) && l + 1 < weights.layers.length) pass.submit();
    });

    if (R > 0) {
      const lnG = this.kernel('lnGather', () =>
        makeKernel(device, ...withWgSum(this.gpu, ['wg_sum', 'layer_norm'], { C, WG: 256, GATHER: true }), ['uniform', 'read', 'read', 'read', 'rw', 'read']),
      );
      pass.setPipeline(lnG.pipeline);
      pass.setBindGroup(
        0,
        this.group('lnOut', lnG, [buf.batch, buf.x, weights.lnOut[0], weights.lnOut[1], buf.xo, buf.rows]),
      );
      pass.dispatchWorkgroups(R);
      this.matmul(pass, 'head', weights.head, buf.xo, buf.logits, R, [{ xOff: 0, yOff: 0 }], true);
    }
    return pass.ops;
  }

  /**
   * The dispatches a sub-pass of `tokens` tokens in `jobs` jobs of equal length with `rows` logits rows records,
   * by profiler label, in order (tests and benchmarks count them).
   */
  dispatchLabels(tokens: number, jobs: number, rows: number): string[] {
    return this.dispatchSizes(tokens, jobs, rows).map((d) => d.label);
  }

  /** dispatchLabels with each dispatch's workgroup counts. */
  dispatchSizes(tokens: number, jobs: number, rows: number): { label: string; x: number; y: number; z: number }[] {
    const wkv = this.wkvFor(Math.ceil(tokens / jobs), tokens, jobs);
    return this.record(tokens, jobs, rows, wkv).flatMap((op) => (op === 'submit' ? [] : [{ label: op.label, x: op.x, y: op.y, z: op.z }]));
  }

  /**
   * Lanes per state row of the fused decode time mix for a sub-pass of T tokens in J jobs, or 0 where it does
   * not run: not a decode step, more jobs than fuseDecodeJobs, a WKV kernel forced (tests and benchmarks
   * compare those), LoRAs stored in a quantised format, or a head too large for one workgroup.
   */
  private decodeFuseLanes(T: number, J: number): number {
    if (T !== J || J > this.fuseDecodeJobs || this.wkvForced) return 0;
    if (this.weights.layers.some((L) => L.lora2.format !== 'f16' && L.lora2.format !== 'f32')) return 0;
    const N = this.info.headSize;
    const maxLanes = Math.min(this.device.limits.maxComputeInvocationsPerWorkgroup, this.device.limits.maxComputeWorkgroupSizeX);
    const fits = (lanes: number) => N % (4 * lanes) === 0 && N * lanes <= maxLanes;
    if (this.tmixLanes && fits(this.tmixLanes)) return this.tmixLanes;
    // 4 lanes a row, as the decode WKV kernel measured best on the H200; fewer where the head is too large.
    for (const lanes of [4, 2, 1]) if (fits(lanes)) return lanes;
    return 0;
  }

  /** shaders/rwkv7_tmix_decode.wgsl over H heads × J jobs: the second LoRA stages, prep, WKV and post at once. */
  private fusedTimeMix(
    pass: Recorder, key: string, l: number, J: number, L: ModelWeights['layers'][number], lanes: number, hid: number, lreg: number, tiles: NormTiles | null,
  ) {
    const { buf } = this;
    const first = l === 0;
    const prelude = weightPrelude({ kind: 'vec', tb: 4 }, this.matmulConfigOf(L.lora2));
    const layout = weightLayoutPart(L.lora2.layout);
    const k = this.kernel(`tmixDecode:${prelude},${layout},${lanes},${first},${this.tmixLoraLoads}${tiles ? ',tiles' : ''}`, () =>
      makeKernel(this.device, ...withWgSum(this.gpu, ['wg_sum', prelude, layout, 'head_common', ...(tiles ? ['block_layout', 'tmix_tiles'] : ['tmix_no_tiles']), 'rwkv7_tmix_decode'], {
        ...this.consts, L: lanes, FIRST: first, WG: this.info.headSize * lanes, LU: this.tmixLoraLoads,
      }), [
        'uniform', 'read', 'uniform', 'uniform', 'read', 'read', 'read', 'read', 'rw', 'rw', 'rw', ...(tiles ? (['rw'] as const) : []),
      ]),
    );
    const u = this.groupUniform(`${key}:lora2>fused`, L.lora2, L.lora2.segs.map((_, i) => ({ xOff: hid + i * lreg, yOff: 0 })), false);
    pass.setPipeline(k.pipeline);
    pass.setBindGroup(
      0,
      this.group(`${key}:tmixDecode:${lanes}${tiles ? ':tiles' : ''}`, k, [
        buf.batch, L.lora2.buffer, this.layerUniforms[l], u.buffer, buf.jobs, buf.tm, L.prep, L.post, buf.vfirst, buf.state, buf.xx, ...(tiles ? [buf.tiledInputs] : []),
      ]),
    );
    pass.dispatchWorkgroups(this.info.nHead, normRows(J, tiles));
  }

  // ---- planning -----------------------------------------------------------------------------------------

  private plan(jobs: SlotJob[]): { passes: SubPass[]; rowsPerJob: number[] } {
    const seen = new Set<number>();
    const rowsPerJob: number[] = [];
    jobs.forEach((j, i) => {
      checkJob(j, i, this.slots, this.V, seen, (a, k) => this.top.check(a, k));
      rowsPerJob.push(j.output === 'all' ? j.tokens.length : j.output === 'last' ? 1 : 0);
      const held = this.rowCounts[j.slot] + j.tokens.length;
      if (this.stateRowFloats > 0 && held > this.maxStateRows)
        throw new RangeError(
          `slot ${j.slot} would hold ${held} tokens of context (${this.rowCounts[j.slot]} cached + ${j.tokens.length}), ` +
            `more than the context limit of ${this.maxStateRows} (maxContext in the engine config)`,
        );
    });
    const passes: SubPass[] = [];
    let cur: SubPass = { segments: [], tokens: 0, rows: 0 };
    const flush = () => {
      if (cur.segments.length) passes.push(cur);
      cur = { segments: [], tokens: 0, rows: 0 };
    };
    jobs.forEach((j, ji) => {
      let pos = 0;
      const n = j.tokens.length;
      while (pos < n) {
        let room = this.TMAX - cur.tokens;
        if (j.output === 'all') room = Math.min(room, this.RMAX - cur.rows);
        const needsLastRow = j.output === 'last' || j.output === 'top';
        if (room <= 0 || (needsLastRow && pos + room >= n && cur.rows >= this.RMAX)) {
          flush();
          continue;
        }
        const to = Math.min(n, pos + room);
        const outMode = j.output === 'all' ? 'all' : needsLastRow && to === n ? j.output : 'none';
        const base = this.rowCounts[j.slot] + pos;
        cur.segments.push({ job: ji, slot: j.slot, tokens: j.tokens, from: pos, to, outFrom: j.output === 'all' ? pos : 0, outMode, base });
        cur.tokens += to - pos;
        cur.rows += outMode === 'all' ? to - pos : outMode === 'none' ? 0 : 1;
        pos = to;
      }
    });
    flush();
    return { passes, rowsPerJob };
  }

  // ---- InferenceBackend -----------------------------------------------------------------------------------

  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.queue
      .then(() => {
        this.checkAlive();
        return fn();
      })
      .catch((e: unknown) => {
        throw this.explain(e);
      });
    this.queue = p.catch(() => undefined);
    return p;
  }

  /**
   * A failed GPU call's error as callers should see it: the device's own failure when it broke (a pending
   * map rejected by a lost device says little, or nothing), and never an empty message.
   */
  private explain(e: unknown): Error {
    const broken = gpuBroken(this.gpu);
    if (broken && !(e instanceof Error && e.message === broken)) return new Error(broken, { cause: e });
    if (e instanceof Error && e.message.trim()) return e;
    return new Error(`GPU call failed without a message${e instanceof Error ? ` (${e.name})` : ''}`, { cause: e });
  }

  /** Why this backend can no longer run (device lost, uncaptured WebGPU error); null while healthy. */
  get lost(): string | null {
    return gpuBroken(this.gpu);
  }

  /** Calls `fn` (once) when the device breaks, so the engine can fail its requests without waiting for a call. */
  onBroken(fn: (reason: string) => void): void {
    this.brokenListeners.push(fn);
  }

  private checkAlive() {
    if (this.disposed) throw new Error('the RWKV backend was disposed');
    const broken = gpuBroken(this.gpu);
    if (broken) throw new Error(broken);
  }

  run(jobs: SlotJob<Exclude<OutputMode, 'top'>>[]): Promise<(Float32Array | null)[]>;
  run(jobs: SlotJob[]): Promise<JobResult[]>;
  run(jobs: SlotJob[]): Promise<JobResult[]> {
    this.draws.touch();
    let planned: ReturnType<Rwkv7Runtime['plan']>;
    try {
      planned = this.plan(jobs);
      if (this.stateRowFloats > 0) {
        this.growRows(Math.max(...jobs.map((j) => this.rowCounts[j.slot] + j.tokens.length)));
        for (const j of jobs) this.rowCounts[j.slot] += j.tokens.length;
      }
    } catch (e) {
      return Promise.reject(e);
    }
    return this.serialize(() => this.execute(jobs, planned.passes, planned.rowsPerJob));
  }

  private get top(): TopLogitsReducer {
    return (this.topReducer ??= new TopLogitsReducer(this.device, this.V, this.slots, this.buf.logits));
  }

  private async execute(jobs: SlotJob[], passes: SubPass[], rowsPerJob: number[]): Promise<JobResult[]> {
    if (!this.onHostTimes) return this.executeTimed(jobs, passes, rowsPerJob, null);
    const times = { start: performance.now(), submitted: 0, mapped: 0, done: 0 };
    const out = await this.executeTimed(jobs, passes, rowsPerJob, times);
    times.done = performance.now();
    this.onHostTimes?.(times);
    return out;
  }

  private async executeTimed(
    jobs: SlotJob[],
    passes: SubPass[],
    rowsPerJob: number[],
    times: { submitted: number; mapped: number } | null,
  ): Promise<JobResult[]> {
    const { device, V } = this;
    const totalRows = rowsPerJob.reduce((a, b) => a + b, 0);
    const rowBytes = V * 4;
    const fullBytes = totalRows * rowBytes;
    // Where each job's rows land in the staging buffer; 'top' results follow all full rows.
    const jobRowBase: number[] = [];
    const topIndex: number[] = [];
    let acc = 0;
    let tops = 0;
    jobs.forEach((j, i) => {
      jobRowBase.push(acc);
      acc += rowsPerJob[i];
      topIndex.push(j.output === 'top' ? tops++ : -1);
    });
    const topBytes = tops > 0 ? this.top.bytes(tops) : 0;
    const staging = fullBytes + topBytes > 0 ? this.stagingBuffer(fullBytes + topBytes) : null;
    let lastOps: Op[] | null = null;
    passes.forEach((sp, spi) => {
      const { copies, topRows } = writeSubPassInputs(device.queue, this.inputBuffers, sp, jobs, jobRowBase, topIndex, this.stateRowFloats > 0);
      const ops = (lastOps = this.opsFor(sp));
      const { before, enc } = this.encodeSubPass(ops);
      for (const [from, to, count] of copies) {
        enc.copyBufferToBuffer(this.buf.logits, from * rowBytes, staging!, to * rowBytes, count * rowBytes);
      }
      if (topRows.length) this.top.encode(enc, topRows);
      if (spi === passes.length - 1 && tops > 0) this.top.copyOut(enc, staging!, fullBytes, tops);
      device.queue.submit(before ? [before, enc.finish()] : [enc.finish()]);
    });
    if (times) times.submitted = performance.now();
    // With nothing to read back, the call is done when its commands are.
    const done = staging ? staging.mapAsync(GPUMapMode.READ, 0, fullBytes + topBytes) : device.queue.onSubmittedWorkDone();
    this.encodeNextAhead(passes.length === 1 ? lastOps : null);
    await done;
    if (times) times.mapped = performance.now();
    if (!staging) {
      this.checkAlive();
      return jobs.map(() => null);
    }
    try {
      // An uncaptured error raised by this call's commands means its results are garbage.
      this.checkAlive();
      // One copy for the whole call, handed out as views: one allocation a step instead of one per slot
      // keeps the garbage collector out of the decode loop. Holders that keep a view beyond the step
      // (prefix cache, idle slots) copy it.
      const all = new Float32Array(totalRows * V);
      if (fullBytes > 0) all.set(new Float32Array(staging.getMappedRange(0, fullBytes)));
      const topWords = tops > 0 ? new Uint32Array(staging.getMappedRange(fullBytes, topBytes).slice(0)) : null;
      return jobs.map((j, i) => {
        if (j.output === 'top') return TopLogitsReducer.parse(topWords!, this.top.stride, topIndex[i]);
        return rowsPerJob[i] ? all.subarray(jobRowBase[i] * V, (jobRowBase[i] + rowsPerJob[i]) * V) : null;
      });
    } finally {
      staging.unmap();
    }
  }

  /** Most steps of one runDraws call; 0 where the state grows (RWKV-7b re-records its ops as rows are added). */
  get maxDrawSteps(): number {
    return this.stateRowFloats > 0 ? 0 : MAX_DRAW_STEPS;
  }

  /**
   * `steps` decode steps of single-token jobs back to back, each row's next token drawn on the GPU and fed to the next
   * step, one read-back at the end (engine/gpu/draw-call.ts). The commands of every step are those of a 'top' call of
   * the same rows.
   */
  runDraws(jobs: DrawJob[], steps: number): Promise<Int32Array> {
    return this.draws.run(jobs, steps);
  }

  /** Steps continueDraws may add after a runDraws call before the next one (the penalty room it reserves). */
  readonly drawContinuationSteps = DRAW_CONTINUATION_STEPS;

  /** The last draw call's jobs, `steps` more steps, queued behind it before it is read back (engine/gpu/draw-call.ts). */
  continueDraws(uniforms: Float32Array[], steps: number): Promise<Int32Array> {
    return this.draws.continue(uniforms, steps);
  }

  /** What the draw calls need of this runtime (gpu/draw-call.ts). */
  private readonly draws = new GpuDraws(() => ({
    device: this.device,
    drawer: () => (this.topDrawer ??= new TopDrawer(this.device, this.top, this.buf.ids, this.slots, MAX_DRAW_STEPS)),
    inputBuffers: () => this.inputBuffers,
    serialize: (fn) => this.serialize(fn),
    holdQueue: (p) => (this.queue = behindBoth(this.queue, p)),
    plan: (jobs) => this.plan(jobs),
    stepsOf: (sp) => {
      const ops = this.opsFor(sp as SubPass);
      return { encodeStep: () => this.encodeSubPass(ops), afterSubmit: () => this.encodeNextAhead(ops) };
    },
    checkAlive: () => this.checkAlive(),
    refusal: () => (this.maxDrawSteps === 0 ? 'the state of this model grows with every token; its steps are drawn on the host' : null),
  }));

  /** The buffers a sub-pass's inputs go to (gpu/sub-pass-inputs.ts). */
  private get inputBuffers(): SubPassBuffers {
    const { batch, ids, tok, jobs, rows } = this.buf;
    return { batch, ids, tok, jobs, rows };
  }

  /**
   * While the GPU runs a call of one sub-pass, its commands encoded again for the next call (when the one before ran
   * them too). Not while profiling or spanning: those encode differently.
   */
  private encodeNextAhead(ops: Op[] | null) {
    if (!ops || this.profiler || this.stepSpan) return this.ahead.clear();
    this.ahead.afterCall(ops, () => encodeAll(this.device, ops));
  }

  private stagingBuffer(bytes: number): GPUBuffer {
    if (!this.staging || this.staging.size < bytes) {
      this.staging?.destroy();
      this.staging = this.device.createBuffer({
        label: 'staging',
        size: Math.ceil(bytes / 4096) * 4096,
        usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      });
    }
    return this.staging;
  }

  private checkSlot(slot: number) {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots)
      throw new RangeError(`slot ${slot} is out of range 0..${this.slots - 1}`);
  }

  readState(slot: number, opts?: { fixedOnly?: boolean }): Promise<StateSnapshot> {
    this.draws.touch();
    this.checkSlot(slot);
    if (this.stateRowFloats > 0 && !opts?.fixedOnly) {
      const rows = this.rowCounts[slot];
      return this.serialize(() => this.readGrowingState(slot, rows));
    }
    return this.serialize(async () => {
      const bytes = this.stateSize * 4;
      // One read-back buffer kept for states: calls are serialized, and allocating (and clearing) tens of MB
      // for each cache insert is what a repeated prompt would pay.
      const staging = (this.stateStaging ??= this.device.createBuffer({
        label: 'state staging',
        size: bytes,
        usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      }));
      const enc = this.device.createCommandEncoder();
      enc.copyBufferToBuffer(this.buf.state, slot * bytes, staging, 0, bytes);
      this.device.queue.submit([enc.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      try {
        this.checkAlive();
        return new Float32Array(staging.getMappedRange().slice(0));
      } finally {
        staging.unmap();
      }
    });
  }

  /**
   * RWKV-7b: the fixed part, then the slot's `rows` rows token-major (per row, each layer's K then V), as the
   * CPU backend's snapshot (state-shape.ts). On the GPU the rows sit per layer; they are reordered here.
   */
  private async readGrowingState(slot: number, rows: number): Promise<StateSnapshot> {
    const fixedBytes = this.stateSize * 4;
    const RW = this.deaRowWidth;
    const layerBytes = rows * RW * 4;
    const L = this.deaRows.length;
    const staging = this.device.createBuffer({ label: 'state staging (rows)', size: fixedBytes + L * layerBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    try {
      const enc = this.device.createCommandEncoder();
      enc.copyBufferToBuffer(this.buf.state, slot * fixedBytes, staging, 0, fixedBytes);
      if (rows > 0) this.deaRows.forEach((b, l) => enc.copyBufferToBuffer(b, slot * this.deaCap * RW * 4, staging, fixedBytes + l * layerBytes, layerBytes));
      this.device.queue.submit([enc.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      this.checkAlive();
      const got = new Float32Array(staging.getMappedRange());
      const out = new Float32Array(this.stateSize + rows * this.stateRowFloats);
      out.set(got.subarray(0, this.stateSize));
      // A piece of rows at a time (all layers), a turn of the event loop between pieces: the rows run to the context limit.
      await inPieces(rows, this.rowsPerPiece, (r0, r1) => {
        for (let l = 0; l < L; l++)
          for (let r = r0; r < r1; r++) {
            const from = this.stateSize + (l * rows + r) * RW;
            out.set(got.subarray(from, from + RW), this.stateSize + r * this.stateRowFloats + l * RW);
          }
      });
      this.checkAlive();
      staging.unmap();
      return out;
    } finally {
      staging.destroy();
    }
  }

  writeState(slot: number, state: StateSnapshot): void {
    this.draws.touch();
    this.checkSlot(slot);
    this.checkAlive();
    if (this.stateRowFloats === 0 && state.length !== this.stateSize)
      throw new RangeError(`state has ${state.length} floats; this model's state has ${this.stateSize}`);
    const rows = snapshotRows(this, state.length);
    if (this.stateRowFloats === 0) {
      this.device.queue.writeBuffer(this.buf.state, slot * this.stateSize * 4, state.buffer, state.byteOffset, this.stateSize * 4);
      return;
    }
    // RWKV-7b: the count now (calls made from here on plan with it), the upload queued behind the calls made before,
    // a piece of rows at a time with turns of the event loop between (the rows run to the context limit).
    this.growRows(rows);
    const fewer = rows < this.rowCounts[slot];
    this.rowCounts[slot] = rows;
    this.rowWorkQueued++;
    void this.serialize(() => this.uploadState(slot, state, rows))
      .catch(() => undefined) // a broken device is reported by the calls themselves
      .finally(() => this.rowWorkQueued--);
    if (fewer) this.shrinkRowsLater();
  }

  /** RWKV-7b: rows whose count takes one piece of state work (yield-chunks.ts), at least one. */
  private get rowsPerPiece(): number {
    return Math.max(1, Math.floor(YIELD_FLOATS / this.stateRowFloats));
  }

  /**
   * RWKV-7b: the snapshot's fixed part, then its token-major rows reordered into each layer's buffer a piece at a
   * time. The buffers are looked up for each piece: a call made meanwhile may grow them (growRows copies the rows
   * uploaded so far, as the slot's count already says `rows`).
   */
  private async uploadState(slot: number, state: StateSnapshot, rows: number): Promise<void> {
    this.device.queue.writeBuffer(this.buf.state, slot * this.stateSize * 4, state.buffer, state.byteOffset, this.stateSize * 4);
    const RW = this.deaRowWidth;
    const piece = new Float32Array(Math.min(rows, this.rowsPerPiece) * RW);
    await inPieces(rows, this.rowsPerPiece, (r0, r1) => {
      this.checkAlive();
      for (let l = 0; l < this.deaRows.length; l++) {
        for (let r = r0; r < r1; r++) {
          const from = this.stateSize + r * this.stateRowFloats + l * RW;
          piece.set(state.subarray(from, from + RW), (r - r0) * RW);
        }
        this.device.queue.writeBuffer(this.deaRows[l], (slot * this.deaCap + r0) * RW * 4, piece, 0, (r1 - r0) * RW);
      }
    });
  }

  /** RWKV-7b: a state change applied now, or behind the row uploads still queued so it lands after them. */
  private ordered(apply: () => void): void {
    if (this.rowWorkQueued === 0) return apply();
    this.rowWorkQueued++;
    void this.serialize(async () => apply())
      .catch(() => undefined)
      .finally(() => this.rowWorkQueued--);
  }

  /** RWKV-7b: GPU bytes the cached rows take (every layer's buffer of all slots' rows, and the copy scratch); 0 otherwise. */
  rowCacheBytes(): number {
    return this.deaRows.reduce((sum, b) => sum + b.size, 0) + (this.rowsTmp?.size ?? 0);
  }

  /** Bytes readState(slot) would give once the calls made so far have run (RWKV-7b: the fixed part and the rows). */
  stateBytes(slot: number): number {
    this.checkSlot(slot);
    return 4 * (this.stateSize + this.rowCounts[slot] * this.stateRowFloats);
  }

  resetState(slot: number): void {
    this.draws.touch();
    this.checkSlot(slot);
    this.checkAlive();
    const hadRows = this.rowCounts[slot] > 0;
    this.rowCounts[slot] = 0;
    this.ordered(() => {
      const enc = this.device.createCommandEncoder();
      enc.clearBuffer(this.buf.state, slot * this.stateSize * 4, this.stateSize * 4);
      this.device.queue.submit([enc.finish()]);
    });
    if (hadRows) this.shrinkRowsLater();
  }

  copyState(fromSlot: number, toSlot: number): void {
    this.draws.touch();
    this.checkSlot(fromSlot);
    this.checkSlot(toSlot);
    this.checkAlive();
    if (fromSlot === toSlot) return;
    const rows = this.rowCounts[fromSlot];
    const fewer = rows < this.rowCounts[toSlot];
    this.rowCounts[toSlot] = rows;
    this.ordered(() => {
      const bytes = this.stateSize * 4;
      const enc = this.device.createCommandEncoder();
      // WebGPU forbids a copy within one buffer, so go through a one-slot scratch buffer.
      enc.copyBufferToBuffer(this.buf.state, fromSlot * bytes, this.buf.stateTmp, 0, bytes);
      enc.copyBufferToBuffer(this.buf.stateTmp, 0, this.buf.state, toSlot * bytes, bytes);
      if (rows > 0) {
        // RWKV-7b: each layer's rows through a scratch buffer too.
        const layerBytes = rows * this.deaRowWidth * 4;
        const slotBytes = this.deaCap * this.deaRowWidth * 4;
        if (!this.rowsTmp || this.rowsTmp.size < layerBytes) {
          this.rowsTmp?.destroy();
          this.rowsTmp = createBuffer(this.device, 'rowsTmp', layerBytes, GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST);
        }
        for (const b of this.deaRows) {
          enc.copyBufferToBuffer(b, fromSlot * slotBytes, this.rowsTmp, 0, layerBytes);
          enc.copyBufferToBuffer(this.rowsTmp, 0, b, toSlot * slotBytes, layerBytes);
        }
      }
      this.device.queue.submit([enc.finish()]);
    });
    if (fewer) this.shrinkRowsLater();
  }

  /** Frees every GPU buffer of this runtime, weights included, and the device when the runtime owns it. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.unwatch();
    this.brokenListeners.length = 0;
    for (const b of Object.values(this.buf)) b.destroy();
    for (const b of this.layerUniforms) b.destroy();
    for (const u of this.matUniforms.values()) u.buffer.destroy();
    for (const b of weightBuffers(this.weights)) b.destroy();
    this.staging?.destroy();
    this.stateStaging?.destroy();
    for (const b of this.deaRows) b.destroy();
    this.rowsTmp?.destroy();
    for (const b of this.wkvScratchBuffers.values()) b.destroy();
    this.wkvScratchBuffers.clear();
    this.topDrawer?.dispose();
    this.draws.dispose();
    this.topReducer?.dispose();
    this.kernels.clear();
    this.groups.clear();
    this.recorded.clear();
    this.ahead.clear();
    this.matUniforms.clear();
    if (this.ownsDevice) releaseGpu(this.gpu);
  }
}

/** Every GPU buffer a ModelWeights holds, found by walking it (so a new weight field is freed too). */
function weightBuffers(weights: ModelWeights): GPUBuffer[] {
  const found = new Set<GPUBuffer>();
  const walk = (v: unknown) => {
    if (!v || typeof v !== 'object' || ArrayBuffer.isView(v)) return;
    const o = v as Record<string, unknown>;
    if (typeof o.destroy === 'function' && typeof o.mapAsync === 'function') found.add(v as GPUBuffer);
    else for (const x of Object.values(o)) walk(x);
  };
  walk(weights);
  return [...found];
}
