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
//   chunk        shaders/rwkv7_wkv_chunk_prep.wgsl then rwkv7_wkv_chunk_scan.wgsl: tokens in chunks of `tc`; the
//                first pass works out what each chunk does to a state (for all chunks at once), the second carries
//                each job's state from chunk to chunk, `rows` rows a workgroup. Same arithmetic in another order
//                (not the same bits), and a scratch buffer of wkvScratchFloats; for prefill only.

import type { GpuContext } from '../gpu/device';
import { isCpuDriverName } from '../gpu/capabilities';
import type { BindingKind } from '../gpu/kernel';

export type WkvVariant =
  | { kind: 'row' }
  | { kind: 'row-staged' }
  | { kind: 'split'; lanes: number; rows: number; reduce: 'subgroup' | 'shared' }
  | { kind: 'chunk'; tc: 16 | 32; rows: number };

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
}

/** Jobs of at least this many tokens in a sub-pass choose the prefill variant; shorter ones the decode variant. */
export const WKV_PREFILL_TOKENS = 16;

export function wkvDevice(gpu: GpuContext, headSize: number): WkvDevice {
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
  if (v.kind === 'chunk') return `chunk${v.tc}x${v.rows}`;
  return v.kind === 'split' ? `split${v.lanes}x${v.rows}-${v.reduce}` : v.kind;
}

/** The variant a name (wkvVariantName's form, e.g. 'split16x4-subgroup') stands for; an unknown name is an error. */
export function parseWkvVariant(name: string): WkvVariant {
  if (name === 'row' || name === 'row-staged') return { kind: name };
  const c = /^chunk(16|32)x(\d+)$/.exec(name);
  if (c) return { kind: 'chunk', tc: Number(c[1]) as 16 | 32, rows: Number(c[2]) };
  const m = /^split(\d+)x(\d+)-(subgroup|shared)$/.exec(name);
  if (!m) throw new RangeError(`unknown WKV kernel variant '${name}'; expected row, row-staged, splitLxR-subgroup|shared (e.g. split16x4-subgroup) or chunkTCxR (TC 16 or 32, e.g. chunk16x16)`);
  return { kind: 'split', lanes: Number(m[1]), rows: Number(m[2]), reduce: m[3] as 'subgroup' | 'shared' };
}

const isPow2 = (x: number) => Number.isInteger(x) && x > 0 && (x & (x - 1)) === 0;

/** Why a device cannot run a variant for this model, or null when it can. */
export function wkvUnsupported(v: WkvVariant, d: WkvDevice): string | null {
  const N = d.headSize;
  if (N > d.maxInvocations) return `head size ${N} exceeds the device's ${d.maxInvocations} invocations per workgroup`;
  if (v.kind === 'row') return null;
  if (v.kind === 'chunk') {
    if (N % 4 !== 0) return `head size ${N} is not a multiple of 4`;
    if (!isPow2(v.rows) || N % v.rows !== 0) return `rows (${v.rows}) must be a power of two dividing the head size ${N}`;
    if (v.rows * N > d.maxInvocations) return `${v.rows * N} invocations exceed the device's ${d.maxInvocations} per workgroup`;
    // The two passes' workgroup memory: the scan's chunk copy, rows and v values; the prep's row sums.
    const bytes = Math.max((wkvChunkFloats(N, v.tc) + v.rows * N + v.rows * v.tc) * 4, chunkPrepRows(N, v.tc) * chunkPrepLanes(N) * 8);
    return bytes > d.maxWorkgroupStorage ? `it needs ${bytes} bytes of workgroup memory, the device has ${d.maxWorkgroupStorage}` : null;
  }
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

/** Lanes a virtual row of the chunked first pass spreads over (vec4 columns each, as the split kernel's rows). */
function chunkPrepLanes(N: number): number {
  return [8, 4, 2, 1].find((l) => N % (4 * l) === 0)!;
}

/** Virtual rows a workgroup of the chunked first pass walks (a divisor of the N + TC rows of a head's chunk). */
function chunkPrepRows(N: number, tc: number): number {
  return [8, 4, 2, 1].find((r) => (N + tc) % r === 0)!;
}

/** Floats of one (chunk, head) of the chunked variant's scratch: G [N][N], E [TC][N], F [N][TC], L [TC][TC]. */
export function wkvChunkFloats(N: number, tc: number): number {
  return N * N + 2 * tc * N + tc * tc;
}

/** Most chunks a sub-pass of T tokens in J jobs has: each job's last chunk may be partial, and each has a token. */
export function wkvMaxChunks(tc: number, T: number, J: number): number {
  return Math.min(T, Math.ceil(T / tc) + J);
}

/** Floats of scratch a variant needs for H heads of size N, up to TMAX tokens in JMAX jobs (0: none). */
export function wkvScratchFloats(v: WkvVariant, H: number, N: number, TMAX: number, JMAX: number): number {
  return v.kind === 'chunk' ? wkvMaxChunks(v.tc, TMAX, JMAX) * H * wkvChunkFloats(N, v.tc) : 0;
}

/** Every variant worth timing (the benchmark's list, what the tests force one by one), supported or not. */
export function wkvVariants(): WkvVariant[] {
  const all: WkvVariant[] = [{ kind: 'row' }, { kind: 'row-staged' }];
  for (const reduce of ['subgroup', 'shared'] as const) {
    // 64-lane workgroups, and one of 256 lanes to see whether fewer, larger workgroups pay.
    for (const lanes of [4, 8, 16, 32]) all.push({ kind: 'split', lanes, rows: 64 / lanes, reduce });
    all.push({ kind: 'split', lanes: 16, rows: 16, reduce });
  }
  // Chunks of 16 and 32 tokens; 4 rows a scan workgroup (256 invocations, WebGPU's default limit) and 16 (1,024).
  for (const tc of [16, 32] as const) for (const rows of [4, 16]) all.push({ kind: 'chunk', tc, rows });
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
const PREFERENCE: Record<'gpu' | 'cpu', Record<'decode' | 'prefill', string[]>> = {
  gpu: {
    decode: ['split4x16-subgroup', 'split4x16-shared', 'split8x8-shared', 'split16x4-shared', 'row-staged'],
    prefill: ['split8x8-shared', 'split16x4-shared', 'split4x16-shared', 'split8x8-subgroup'],
  },
  cpu: { decode: ['row'], prefill: ['row'] },
};

/** The variant for a sub-pass whose longest job has `longestJob` tokens. */
export function chooseWkv(longestJob: number, d: WkvDevice): WkvVariant {
  const prefill = longestJob >= WKV_PREFILL_TOKENS;
  const order = [...(prefill ? (d.prefillFirst ?? []) : []), ...PREFERENCE[d.cpuDriver ? 'cpu' : 'gpu'][prefill ? 'prefill' : 'decode']];
  for (const name of order) {
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
  constants: Record<string, number>;
  bindings: BindingKind[];
  scratch: boolean;
  /** Workgroups for H heads, J jobs and T tokens in the sub-pass. */
  dispatch: (H: number, J: number, T: number) => [number, number];
}

/** The dispatches of a variant, in order: one for every variant but 'chunk' (its two passes). */
export function wkvPasses(v: WkvVariant, c: WkvConstants): WkvPass[] {
  if (v.kind !== 'chunk') {
    const shader = wkvShader(v, c);
    return [{ ...shader, bindings: WKV_BINDINGS, scratch: false, dispatch: (H, J) => wkvDispatch(v, H, c.N, J) }];
  }
  const L = chunkPrepLanes(c.N);
  const ROWS = chunkPrepRows(c.N, v.tc);
  return [
    {
      parts: ['head_common', 'wkv_rowsum_shared', 'rwkv7_wkv_chunk_prep'],
      constants: { ...c, TC: v.tc, L, ROWS },
      bindings: [...WKV_BINDINGS, 'rw'],
      scratch: true,
      dispatch: (H, J, T) => [(H * (c.N + v.tc)) / ROWS, wkvMaxChunks(v.tc, T, J)],
    },
    {
      parts: ['head_common', 'rwkv7_wkv_chunk_scan'],
      constants: { ...c, TC: v.tc, RS: v.rows },
      bindings: [...WKV_BINDINGS, 'rw'],
      scratch: true,
      dispatch: (H, J) => [(H * c.N) / v.rows, J],
    },
  ];
}

/** The kernel of a one-pass variant (wkvPasses' part for every variant but 'chunk'). */
function wkvShader(v: OnePassWkv, c: WkvConstants): { parts: string[]; constants: Record<string, number> } {
  if (v.kind === 'row') return { parts: ['head_common', 'rwkv7_wkv'], constants: { ...c } };
  if (v.kind === 'row-staged') return { parts: ['head_common', 'rwkv7_wkv_staged'], constants: { ...c } };
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
  return decode === prefill ? `WKV ${decode}` : `WKV ${decode}, ${prefill} from ${WKV_PREFILL_TOKENS} tokens a job`;
}
