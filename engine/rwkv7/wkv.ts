// The kernel variants of the RWKV-7 WKV recurrence (the per-head state update walked token by token), what
// each needs from a device, and which one runs for a batch. All of them read and write the state in its
// official layout ([head, value-index, key-index], as readState/writeState, state files and the prefix cache
// see it) and use the same five bindings (WKV_BINDINGS; the chunked passes add their scratch as a sixth).
//
//   row          shaders/rwkv7_wkv.wgsl: one workgroup of N lanes per (head, job), lane i owns row i. The
//                first kernel and the reference the others are checked against; its state loads are
//                uncoalesced (each lane walks its own 256-byte row).
//   row-staged   shaders/rwkv7_wkv_staged.wgsl: the same arithmetic, bit for bit, with the state moved
//                through padded workgroup memory so loads and stores are coalesced.
//   split        shaders/rwkv7_wkv_split.wgsl: each row over `lanes` lanes of a vec4 column each (or more),
//                `rows` rows per workgroup, so a head spreads over N/rows workgroups and a token's serial
//                work per lane shrinks from ~3N multiply-adds to ~3N/lanes plus a log2(lanes)-step sum.
//                The sum runs on subgroup shuffles ('subgroup') or through workgroup memory ('shared').
//   chunkT       engine/rwkv7/wkv-chunk.ts, shaders/rwkv7_wkv_chunk_{prep,scan}.wgsl: chunk-parallel ('chunk16',
//                'chunk32'). A chunk of T tokens acts on each state row as one (N+T)×(N+T) matrix of the chunk's
//                vectors alone, so a first kernel builds every chunk's matrix at once, running the same
//                recurrence on N+T virtual rows over only T tokens, and a second carries the state from chunk
//                to chunk: ~N+T multiply-adds a chunk in place of T row reductions. Exact algebra, f32; the
//                results differ from the reference only by rounding. The first kernel's row sums run through
//                workgroup memory ('chunkT') or on subgroup shuffles ('chunkT-subgroup'): it is bound by
//                throughput, not by a chain, so the split kernels' verdict need not hold. A scratch buffer of
//                wkvScratchFloats; for prefill only: on GPUs chunk16-subgroup runs jobs from wkvMidTokens (128 or
//                256 tokens, by heads) and chunk32-subgroup from WKV_CHUNK_TOKENS; the others run where
//                RWKV_WKV_PREFILL names them (PREFERENCE says why).

import type { GpuContext } from '../gpu/device';
import { isCpuDriverName } from '../gpu/capabilities';
import type { BindingKind } from '../gpu/kernel';
import type { ShaderConstant } from '../gpu/shader-source';
import { chunkPasses, type ChunkPrepInvocations, type ChunkPrepSum, CHUNK_PREP_INVOCATIONS, CHUNK_PREP_WIDER, chunkScratchFloats, chunkUnsupported, wkvMaxChunks } from './wkv-chunk';

export { wkvMaxChunks };

export type WkvVariant =
  | { kind: 'row' }
  | { kind: 'row-staged' }
  | { kind: 'split'; lanes: number; rows: number; reduce: 'subgroup' | 'shared' }
  /** invocations: of a prep workgroup (CHUNK_PREP_INVOCATIONS when absent; named `-wgN` when set). */
  | { kind: 'chunk'; tokens: number; reduce: ChunkPrepSum; invocations?: ChunkPrepInvocations };

/** Every variant but 'chunk': one dispatch with the five common bindings. */
type OnePassWkv = Exclude<WkvVariant, { kind: 'chunk' }>;

/** What the choice reads from a device and model (plain data, so the choice is testable without a GPU). */
export interface WkvDevice {
  /** Head size N of the model. */
  headSize: number;
  /** Smallest subgroup the device may run, 0 without the 'subgroups' feature. */
  subgroupMinSize: number;
  maxWorkgroupStorage: number;
  maxInvocations: number;
  /** A CPU driver (lavapipe, SwiftShader): its own preference order. */
  cpuDriver: boolean;
  /** Prefill variants tried before the preference order (RWKV_WKV_PREFILL, comma-separated names): for A/B runs. */
  prefillFirst?: string[];
  /**
   * The largest batch the caller (a runtime, a harness) sizes a variant's scratch buffer for and the largest buffer
   * the device binds, for the variants with one (chunkT); left out, their scratch is not checked.
   */
  batch?: WkvBatchLimits;
  /** Heads of a layer, where known (else batch.heads): from how many tokens the chunked variant pays depends on it. */
  heads?: number;
}

export interface WkvBatchLimits {
  heads: number;
  /** Most tokens of one batch (the runtime's maxTokens). */
  tokens: number;
  /** Most jobs of one batch the scratch has room for. */
  jobs: number;
  /** min(maxStorageBufferBindingSize, maxBufferSize). */
  maxBindingBytes: number;
}

/** Jobs of at least this many tokens in a sub-pass choose the prefill variant; shorter ones the decode variant. */
export const WKV_PREFILL_TOKENS = 16;

/** The device's facts; with `batch` (heads, tokens and jobs of the largest batch) also its binding limit. */
export function wkvDevice(gpu: GpuContext, headSize: number, batch?: { heads: number; tokens: number; jobs: number }): WkvDevice {
  const { device } = gpu;
  const info = (device as GPUDevice & { adapterInfo?: { subgroupMinSize?: number } }).adapterInfo;
  const reported = info?.subgroupMinSize ?? (gpu.subgroup32 ? 32 : 0);
  return {
    headSize,
    subgroupMinSize: gpu.features.has('subgroups') ? reported : 0,
    maxWorkgroupStorage: device.limits.maxComputeWorkgroupStorageSize,
    maxInvocations: Math.min(device.limits.maxComputeInvocationsPerWorkgroup, device.limits.maxComputeWorkgroupSizeX),
    cpuDriver: isCpuDriverName(gpu.adapterName),
    prefillFirst: wkvPrefillFromEnv(),
    batch: batch && { ...batch, maxBindingBytes: Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize) },
  };
}

/** RWKV_WKV_PREFILL: variant names (checked here) the prefill choice tries first. */
export function wkvPrefillFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  const raw = env.RWKV_WKV_PREFILL?.trim();
  if (!raw) return [];
  const names = raw.split(',').map((n) => n.trim());
  for (const n of names) parseWkvVariant(n); // an unknown name is an error, not a silent fallback
  return names;
}

export function wkvVariantName(v: WkvVariant): string {
  if (v.kind === 'chunk') {
    const wg = v.invocations && v.invocations !== CHUNK_PREP_INVOCATIONS ? `-wg${v.invocations}` : '';
    return `chunk${v.tokens}${v.reduce === 'shared' ? '' : `-${v.reduce}`}${wg}`;
  }
  return v.kind === 'split' ? `split${v.lanes}x${v.rows}-${v.reduce}` : v.kind;
}

/** The chunk variants wkvVariants() lists, for messages (each also with -wg128 or -wg256: wider prep workgroups). */
const CHUNK_NAMES = 'chunk16, chunk32, chunk16-subgroup, chunk32-subgroup, chunk16-lane, chunk32-lane';

/**
 * The variant a name (wkvVariantName's form, e.g. 'split16x4-subgroup', 'chunk16', 'chunk32-subgroup') stands for;
 * an unknown name is an error.
 */
export function parseWkvVariant(name: string): WkvVariant {
  if (name === 'row' || name === 'row-staged') return { kind: name };
  // -wgN sizes the summing preps' workgroups; the lane prep's are N + T lanes.
  const chunk = /^chunk([1-9]\d*)(?:(-lane)|(-subgroup)?(?:-wg(64|128|256))?)$/.exec(name);
  if (chunk?.[2]) return { kind: 'chunk', tokens: Number(chunk[1]), reduce: 'lane' };
  if (chunk) {
    const v: WkvVariant = { kind: 'chunk', tokens: Number(chunk[1]), reduce: chunk[3] ? 'subgroup' : 'shared' };
    return chunk[4] && Number(chunk[4]) !== CHUNK_PREP_INVOCATIONS ? { ...v, invocations: Number(chunk[4]) as ChunkPrepInvocations } : v;
  }
  // The first chunked kernel's names (chunk16x4 … chunk32x16): replaced, so say what stands in their place.
  if (/^chunk\d+x\d+$/.test(name))
    throw new RangeError(`WKV kernel variant '${name}' (chunkTCxR) was replaced by the chunkT[-subgroup] variants: ${CHUNK_NAMES}`);
  const m = /^split(\d+)x(\d+)-(subgroup|shared)$/.exec(name);
  if (!m)
    throw new RangeError(
      `unknown WKV kernel variant '${name}'; expected row, row-staged, splitLxR-subgroup|shared (e.g. split16x4-subgroup) or chunkT[-subgroup][-wg128|-wg256] or chunkT-lane (${CHUNK_NAMES})`,
    );
  return { kind: 'split', lanes: Number(m[1]), rows: Number(m[2]), reduce: m[3] as 'subgroup' | 'shared' };
}

const isPow2 = (x: number) => Number.isInteger(x) && x > 0 && (x & (x - 1)) === 0;

/** Why a device cannot run a variant for this model, or null when it can. */
export function wkvUnsupported(v: WkvVariant, d: WkvDevice): string | null {
  const N = d.headSize;
  if (N > d.maxInvocations) return `head size ${N} exceeds the device's ${d.maxInvocations} invocations per workgroup`;
  if (v.kind === 'row') return null;
  if (v.kind === 'chunk') return chunkUnsupported(v.tokens, v.reduce, d, v.invocations);
  if (v.kind === 'row-staged') {
    if (N % 2 !== 0) return `head size ${N} is odd`;
    const bytes = (N * (N + 1) + 5 * N) * 4;
    return bytes > d.maxWorkgroupStorage ? `it needs ${bytes} bytes of workgroup memory, the device has ${d.maxWorkgroupStorage}` : null;
  }
  const { lanes, rows, reduce } = v;
  if (!isPow2(lanes) || !isPow2(rows)) return `lanes (${lanes}) and rows (${rows}) must be powers of two`;
  if (N % (4 * lanes) !== 0) return `head size ${N} is not a multiple of 4 × ${lanes} lanes`;
  if (N % rows !== 0) return `head size ${N} is not a multiple of ${rows} rows`;
  if (lanes * rows > d.maxInvocations) return `${lanes * rows} invocations exceed the device's ${d.maxInvocations} per workgroup`;
  if (reduce === 'subgroup') {
    if (d.subgroupMinSize === 0) return 'the device has no subgroups';
    if (d.subgroupMinSize < lanes) return `its subgroups may be ${d.subgroupMinSize} lanes, fewer than ${lanes}`;
  }
  const bytes = reduce === 'shared' ? lanes * rows * 8 : 0;
  return bytes > d.maxWorkgroupStorage ? `it needs ${bytes} bytes of workgroup memory, the device has ${d.maxWorkgroupStorage}` : null;
}

/** Floats of the scratch buffer a variant needs for batches up to `tokens` tokens in `jobs` jobs (0: none). */
export function wkvScratchFloats(v: WkvVariant, H: number, N: number, tokens: number, jobs: number): number {
  return v.kind === 'chunk' ? chunkScratchFloats(v.tokens, H, N, tokens, jobs) : 0;
}

/** Every variant worth timing (the benchmark's list, what the tests force one by one), supported or not. */
export function wkvVariants(): WkvVariant[] {
  const all: WkvVariant[] = [{ kind: 'row' }, { kind: 'row-staged' }];
  for (const reduce of ['subgroup', 'shared'] as const) {
    // 64-lane workgroups, and one of 256 lanes to see whether fewer, larger workgroups pay.
    for (const lanes of [4, 8, 16, 32]) all.push({ kind: 'split', lanes, rows: 64 / lanes, reduce });
    all.push({ kind: 'split', lanes: 16, rows: 16, reduce });
  }
  for (const reduce of ['shared', 'subgroup'] as const) for (const tokens of [16, 32]) all.push({ kind: 'chunk', tokens, reduce });
  // The prep in wider workgroups (more virtual rows of one head share each token's vectors through L1), one of each sum.
  all.push({ kind: 'chunk', tokens: 16, reduce: 'shared', invocations: CHUNK_PREP_WIDER }, { kind: 'chunk', tokens: 32, reduce: 'subgroup', invocations: CHUNK_PREP_WIDER });
  // One lane a virtual row: no row sums, each token's vectors loaded once for a whole (chunk, head).
  // And chunks of 64: half the scan's serial chunks for a prep chain twice as long (4 warps a (chunk, head)).
  for (const tokens of [16, 32, 64]) all.push({ kind: 'chunk', tokens, reduce: 'lane' });
  return all;
}

/** wkvVariants() that this device runs for this model. */
export function wkvCandidates(d: WkvDevice): WkvVariant[] {
  return wkvVariants().filter((v) => wkvUnsupported(v, d) === null);
}

/**
 * Preference orders, best first; the first variant the device supports runs. Measured on the H200 with
 * bench/wkv.ts (bench/RESULTS.md, 2026-12-03 ≈08:05 UTC): for decode the 4-lane rows with a subgroup reduction
 * (1.5B, 64 jobs: 34.5 µs against 157 for the first kernel; 1 and 8 jobs within 0.2 µs of the best); for long
 * jobs the 8-lane rows reduced through workgroup memory (1.5B, 512 tokens: 198 µs against 621, and 1.8× the
 * 8-lane subgroup reduction, whose shuffles sit on the token's serial chain).
 * CPU drivers (lavapipe) keep the first kernel: no variant is faster there overall (bench/wkv.ts, 0.1B shape,
 * shared 2-core CPU; best other variant against it: decode of 1/8/64 jobs ×0.63/×1.39/×0.59, prefill of
 * 128/512 tokens ×1.29/×1.05), and each split kernel costs several seconds of LLVM compilation per model
 * shape where the first one takes about one.
 */
// Jobs from wkvMidTokens(heads) tokens ('mid') take chunk16-subgroup first: alone on the H200 (bench/wkv.ts, twelfth
// session, clock held, µs a layer, split8x8-shared / chunk16-subgroup) 12 heads (0.1B) 49.4 / 33.8 at 128 tokens and
// 95.9 / 50.1 at 256, 16 heads (0.4B) 49.4 / 34.5 and 96.1 / 56.1, 32 heads (1.5B) 50.2 / 49.3 (a tie, and the chunked
// form is two dispatches) and 97.1 / 86.5; at 64 tokens the split kernel won every shape (26.0 against 26.7–31.6).
// Jobs of WKV_CHUNK_TOKENS or more ('long') take chunk32-subgroup first: in the engine on the H200 (1.5B, bench
// engine section, processes split / chunk / split, 2026-12-04 eleventh session) a 512-token prefill ran at 21,052 /
// 24,100 / 21,002 tok/s, while 128-token chunks lost (10,144 / 9,221 / 9,624); alone (bench/wkv.ts, 512 tokens)
// 172 µs a layer against split8x8-shared's 192. The other chunk variants are in no order: slower alone (the -lane ones
// too, eighteenth session: 1.5B at 512 tokens 301 µs a layer against chunk32-subgroup's 175, and so at every length
// and shape timed). A CPU driver
// keeps the first kernel (the chunked one does ~1.25× its arithmetic, which a CPU pays in full).
const PREFERENCE: Record<'gpu' | 'cpu', Record<WkvTier, string[]>> = {
  gpu: {
    decode: ['split4x16-subgroup', 'split4x16-shared', 'split8x8-shared', 'split16x4-shared', 'row-staged'],
    prefill: ['split8x8-shared', 'split16x4-shared', 'split4x16-shared', 'split8x8-subgroup'],
    mid: ['chunk16-subgroup', 'split8x8-shared', 'split16x4-shared', 'split4x16-shared', 'split8x8-subgroup'],
    long: ['chunk32-subgroup', 'split8x8-shared', 'split16x4-shared', 'split4x16-shared', 'split8x8-subgroup'],
  },
  cpu: { decode: ['row'], prefill: ['row'], mid: ['row'], long: ['row'] },
};

type WkvTier = 'decode' | 'prefill' | 'mid' | 'long';

/** Jobs of at least this many tokens in a sub-pass choose the 'long' order (the chunked prefill first). */
export const WKV_CHUNK_TOKENS = 512;

/**
 * Jobs of at least this many tokens (and fewer than WKV_CHUNK_TOKENS) choose the 'mid' order, chunk16-subgroup first:
 * 128 for layers of up to 16 heads, 256 up to 32 (PREFERENCE says what was measured); none above 32 heads or where
 * the heads are not known (not measured: more heads give the split kernel more workgroups).
 */
export function wkvMidTokens(heads: number | undefined): number {
  if (heads === undefined || heads > 32) return Infinity;
  return heads <= 16 ? 128 : 256;
}

/** wkvMidTokens for a device description: its layer's heads, else its batch limits' heads. */
function midTokensOf(d: WkvDevice): number {
  return wkvMidTokens(d.heads ?? d.batch?.heads);
}

function tierOf(longestJob: number, d: WkvDevice): WkvTier {
  if (longestJob >= WKV_CHUNK_TOKENS) return 'long';
  if (longestJob >= midTokensOf(d)) return 'mid';
  return longestJob >= WKV_PREFILL_TOKENS ? 'prefill' : 'decode';
}

/**
 * The variant for a sub-pass whose longest job has `longestJob` tokens. `chunks: false` leaves the chunked variants
 * out (the runtime's fallback when a batch's chunks would not fit their scratch).
 */
export function chooseWkv(longestJob: number, d: WkvDevice, chunks = true): WkvVariant {
  const tier = tierOf(longestJob, d);
  const order = [...(tier !== 'decode' ? (d.prefillFirst ?? []) : []), ...PREFERENCE[d.cpuDriver ? 'cpu' : 'gpu'][tier]];
  for (const name of order) {
    if (!chunks && name.startsWith('chunk')) continue;
    const v = parseWkvVariant(name);
    if (wkvUnsupported(v, d) === null) return v;
  }
  return { kind: 'row' };
}

/** Constants every WKV variant's shader needs (head_common.wgsl's, and the state stride). */
export interface WkvConstants {
  C: number;
  N: number;
  TMAX: number;
  STATE: number;
}

/** The bindings every WKV kernel has: batch, layer, jobs, tm, state (one bind group serves every variant). */
const WKV_BINDINGS: BindingKind[] = ['uniform', 'uniform', 'read', 'rw', 'rw'];

/** One dispatch of a variant: its shader, its bindings, and whether it binds the chunk scratch (binding 5). */
export interface WkvPass {
  parts: string[];
  constants: Record<string, ShaderConstant>;
  bindings: BindingKind[];
  scratch: boolean;
  /** Workgroups for H heads, J jobs and T tokens in the sub-pass. */
  dispatch: (H: number, J: number, T: number) => [number, number];
}

/**
 * The dispatches of a variant, in order: one for every variant but 'chunk' (its two passes). `flatScan`: the lane
 * variants' scan as straight-line code (GPUs), else as loops (CPU drivers: wkv-chunk.ts chunkScanCode says why).
 */
export function wkvPasses(v: WkvVariant, c: WkvConstants, flatScan = true): WkvPass[] {
  if (v.kind !== 'chunk') {
    const shader = wkvShader(v, c);
    return [{ ...shader, bindings: WKV_BINDINGS, scratch: false, dispatch: (H, J) => wkvDispatch(v, H, c.N, J) }];
  }
  return chunkPasses(v.tokens, v.reduce, c, [...WKV_BINDINGS, 'rw'], v.invocations, flatScan);
}

/** The kernel of a one-pass variant (wkvPasses' part for every variant but 'chunk'). */
function wkvShader(v: OnePassWkv, c: WkvConstants): { parts: string[]; constants: Record<string, number> } {
  if (v.kind === 'row') return { parts: ['head_common', 'wkv_bindings', 'rwkv7_wkv'], constants: { ...c } };
  if (v.kind === 'row-staged') return { parts: ['head_common', 'wkv_bindings', 'rwkv7_wkv_staged'], constants: { ...c } };
  return {
    parts: ['head_common', v.reduce === 'subgroup' ? 'wkv_rowsum_subgroup' : 'wkv_rowsum_shared', 'rwkv7_wkv_split'],
    constants: { ...c, L: v.lanes, ROWS: v.rows },
  };
}

/** Workgroups of a one-pass variant for H heads and J jobs. */
function wkvDispatch(v: OnePassWkv, H: number, N: number, J: number): [number, number] {
  return v.kind === 'split' ? [(H * N) / v.rows, J] : [H, J];
}

/** One line for `rwkv-flow info` and benchmark records. */
export function describeWkv(d: WkvDevice, forced: WkvVariant | null): string {
  if (forced) return `WKV ${wkvVariantName(forced)}`;
  const decode = wkvVariantName(chooseWkv(1, d));
  const prefill = wkvVariantName(chooseWkv(WKV_PREFILL_TOKENS, d));
  const midFrom = midTokensOf(d);
  const mid = Number.isFinite(midFrom) ? wkvVariantName(chooseWkv(midFrom, d)) : prefill;
  const long = wkvVariantName(chooseWkv(WKV_CHUNK_TOKENS, d));
  const parts = [decode];
  if (prefill !== decode) parts.push(`${prefill} from ${WKV_PREFILL_TOKENS} tokens a job`);
  if (mid !== prefill) parts.push(`${mid} from ${midFrom}`);
  if (long !== mid) parts.push(`${long} from ${WKV_CHUNK_TOKENS}`);
  return `WKV ${parts.join(', ')}`;
}
