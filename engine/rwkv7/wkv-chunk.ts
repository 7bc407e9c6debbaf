// The chunk-parallel WKV-7 variant ('chunk16', 'chunk32': chunks of T tokens; '-subgroup': the prep's row sums
// on subgroup shuffles): its two kernels, their dispatches, its scratch buffer and what it needs from a device.
// A job's tokens are cut into chunks of T (the last one shorter); per head, a chunk's effect on any state row is
// one (N+T)×(N+T) matrix M that does not depend on the state, so every chunk of every job is worked out at once
// (prep), and only the chunk-to-chunk carry of the state stays sequential (scan), at ~N+T multiply-adds a chunk
// where the token-by-token kernels chain T reductions.
//
//   prep   shaders/rwkv7_wkv_chunk_prep.wgsl: (H × ceil((N+T)/rows), chunks) workgroups of 64 lanes (256 in the
//          '-wg256' variants), `rows` virtual rows of chunkPrepLanes(N) lanes each (8 rows of 8 at N = 64). Writes M
//          of each (chunk, head) to the scratch buffer. Chunks are numbered across the batch's jobs; wkvMaxChunks bounds them.
//          The '-lane' variants: shaders/rwkv7_wkv_chunk_prep_lane.wgsl, (H, chunks) workgroups of N+T lanes, one
//          lane a virtual row with its N columns in registers (code from chunkLaneCode): the same M, no row sums.
//          Their scan is shaders/rwkv7_wkv_chunk_scan_flat.wgsl: the same product, straight-line on GPUs
//          (chunkScanCode), with 16 state rows a workgroup (FLAT_SCAN_QUADS) so M is read a quarter as often.
//   scan   shaders/rwkv7_wkv_chunk_scan.wgsl: (H × N/4, jobs) workgroups of N+T lanes, sequential over a job's
//          chunks: [s_T | y_1..y_T] = [s_0 | v_1..v_T] M for 4 state rows, then s_T carried to the next chunk.
// Work, against the ~5N multiply-adds a row and token of the token-by-token kernels: the prep does (N+T)/N times
// that, the scan (N+T)²/(5NT) times (1.25 and 1.25 at N = 64, T = 16), so on a CPU driver, bound by throughput,
// the variant is slower (lavapipe, 0.1B, 128 tokens: ~2.6× the first kernel's wall time); on a GPU the gain is
// the parallelism: each chain is T tokens long in the prep and N+T steps a chunk in the scan.

import type { BindingKind } from '../gpu/kernel';
import type { WkvConstants, WkvDevice, WkvPass } from './wkv';

/**
 * How the prep sums a virtual row's dot products: over its lanes through workgroup memory ('shared') or subgroup
 * shuffles ('subgroup'), or not at all ('lane': one lane holds the whole row).
 */
export type ChunkPrepSum = 'subgroup' | 'shared' | 'lane';

/** State rows per scan workgroup: each lane applies its column of M to this many rows at once, as a vec4. */
export const CHUNK_SCAN_ROWS = 4;
/** Invocations of a prep workgroup: rows of `chunkPrepLanes` lanes each (8 virtual rows at N = 64). */
export const CHUNK_PREP_INVOCATIONS = 64;
/**
 * The wider prep the '-wg256' variants run: 32 virtual rows of a head a workgroup, 4× fewer workgroups reading each
 * token's five vectors. On the H200 the 64-lane prep takes ~120–178 µs a layer at 1.5B × 512 tokens where its chain
 * of 32 tokens needs ~12, and its 6,528 workgroups read about 2 GB of those vectors a layer from L2 (each lane
 * 160 bytes a token): if L2 is what bounds it, sharing them in L1 pays. To be measured (bench section `wkv`).
 */
export const CHUNK_PREP_WIDER = 256;
export type ChunkPrepInvocations = 64 | 128 | 256;

/** Lanes per virtual row in the prep kernel: up to 8, each holding whole vec4 columns of the row. */
export function chunkPrepLanes(N: number): number {
  for (const lanes of [8, 4, 2, 1]) if (N % (4 * lanes) === 0) return lanes;
  return 0;
}

/**
 * Most chunks of T tokens a batch of `tokens` tokens in `jobs` jobs cuts into: Σ ceil(len_j / T) ≤
 * (tokens + jobs·(T−1)) / T, and never more than one a token. Chunks are numbered across jobs, so this sizes the
 * prep dispatch and the scratch (wkv.ts exports it; the runtime bounds its sub-passes with it).
 */
export function wkvMaxChunks(T: number, tokens: number, jobs: number): number {
  return Math.min(tokens, Math.floor((tokens + jobs * (T - 1)) / T));
}

/** Floats of scratch for batches of up to `tokens` tokens in up to `jobs` jobs: an (N+T)² matrix per chunk and head. */
export function chunkScratchFloats(T: number, H: number, N: number, tokens: number, jobs: number): number {
  return wkvMaxChunks(T, tokens, jobs) * H * (N + T) ** 2;
}

/**
 * The lane prep's straight-line code for a row of N/4 vec4 columns s0..s{N/4−1} (registers: a private array walked
 * by a loop may be placed in memory): INIT starts row `vr` (e_vr, or 0 from N on), STEP is one token's update of
 * every column and its two sums (py: the output, pn: the next token's removal term), STORE writes the final row.
 */
export function chunkLaneCode(N: number): { INIT: string; STEP: string; STORE: string } {
  const cols = Array.from({ length: N / 4 }, (_, m) => m);
  const lanes = (m: number) => [0, 1, 2, 3].map((i) => `${4 * m + i}u`).join(', ');
  return {
    INIT: cols.map((m) => `var s${m} = select(vec4<f32>(0.0), vec4<f32>(1.0), vec4<u32>(${lanes(m)}) == vec4<u32>(vr));`).join('\n  '),
    STEP: cols
      .map((m) => `s${m} = s${m} * tm[w + ${m}u] - sa * tm[a + ${m}u] + v * tm[k + ${m}u]; py = fma(s${m}, tm[r + ${m}u], py); pn = fma(s${m}, tm[kn + ${m}u], pn);`)
      .join('\n      '),
    STORE: cols.map((m) => `chunks[out + ${m}u] = s${m};`).join('\n  '),
  };
}

/** Quads of state rows (4 rows each) a workgroup of the flat scan carries: 16 rows, so each element of M a workgroup loads serves 16. */
export const FLAT_SCAN_QUADS = 4;

/**
 * The flat scan's code (shaders/rwkv7_wkv_chunk_scan_flat.wgsl) for M of `vrows` = N+T rows and `quads` quads of state
 * rows: LOAD_FIRST loads the lane's column of the first chunk's M; SUM_AND_LOAD adds x[m]·g_m into quad q's accumulator
 * (one chain a quad) and reloads g_m from the next chunk's M right after its use; STORE_SUMS puts the sums back in x
 * (the state's columns) or in y (the outputs' columns). `flat`: straight-line over named registers g0..g{vrows−1} and
 * a0..a{quads−1}, what a GPU runs; otherwise the same operations in the same order as loops over private arrays, for
 * CPU drivers, whose LLVM takes minutes over the straight-line form (lavapipe, N = 64, T = 32, 4 quads: 445 s for
 * the variant's reference test against 33 s with 1 quad).
 */
export function chunkScanCode(vrows: number, quads: number, flat = true): { LOAD_FIRST: string; SUM_AND_LOAD: string; STORE_SUMS: string } {
  const rows = Array.from({ length: vrows }, (_, m) => m);
  const qs = Array.from({ length: quads }, (_, q) => q);
  const acc = (q: number) => (flat ? `a${q}` : `a[${q}u]`);
  const store = [
    'if (col < N) {',
    ...qs.map((q) => `  x[col * QUADS + ${q}u] = ${acc(q)};`),
    '} else if (col - N < n) {',
    '  let o = Y_ * REG + (t0 + col - N) * C + at;',
    ...qs.flatMap((q) => [0, 1, 2, 3].map((e) => `  tm[o + ${4 * q + e}u] = ${acc(q)}.${'xyzw'[e]};`)),
    '}',
  ].join('\n    ');
  if (!flat) {
    return {
      LOAD_FIRST: 'var g: array<f32, VROWS>;\n  for (var m = 0u; m < VROWS; m++) { g[m] = chunks[at0 + m * VROWS]; }',
      SUM_AND_LOAD: [
        // Zeroed explicitly: lavapipe kept a bare declaration's values from the loop's previous trip (RESULTS.md).
        'var a = array<vec4<f32>, QUADS>();',
        'for (var m = 0u; m < VROWS; m++) {',
        '  for (var q = 0u; q < QUADS; q++) { a[q] = fma(x[m * QUADS + q], vec4<f32>(g[m]), a[q]); }',
        '  g[m] = chunks[nat + m * VROWS];',
        '}',
      ].join('\n    '),
      STORE_SUMS: store,
    };
  }
  const sum = [
    ...qs.map((q) => `var a${q} = vec4<f32>(0.0);`),
    ...rows.map((m) => [...qs.map((q) => `a${q} = fma(x[${m * quads + q}], vec4<f32>(g${m}), a${q});`), `g${m} = chunks[nat + ${m * vrows}u];`].join(' ')),
  ];
  return {
    LOAD_FIRST: rows.map((m) => `var g${m} = chunks[at0 + ${m * vrows}u];`).join('\n  '),
    SUM_AND_LOAD: sum.join('\n    '),
    STORE_SUMS: store,
  };
}

/** Why a device cannot run the chunk variant of chunk length T (prep sums by `reduce`) for this model, or null. */
export function chunkUnsupported(T: number, reduce: ChunkPrepSum, d: WkvDevice, invocations: number = CHUNK_PREP_INVOCATIONS): string | null {
  const N = d.headSize;
  if (!Number.isInteger(T) || T < 1) return `chunk length ${T} is not a positive whole number`;
  const lanes = chunkPrepLanes(N);
  if (lanes === 0) return `head size ${N} is not a multiple of 4`;
  // The lane prep writes M's outputs 4 tokens a store, and runs N + T lanes (the scan's count, checked below).
  if (reduce === 'lane' && T % 4 !== 0) return `chunk length ${T} is not a multiple of 4`;
  if (reduce === 'subgroup') {
    if (d.subgroupMinSize === 0) return 'the device has no subgroups';
    if (d.subgroupMinSize < lanes) return `its subgroups may be ${d.subgroupMinSize} lanes, fewer than the prep's ${lanes} a row`;
  }
  const scanRows = reduce === 'lane' ? 4 * FLAT_SCAN_QUADS : CHUNK_SCAN_ROWS;
  if (N % scanRows !== 0) return `head size ${N} is not a multiple of ${scanRows} rows`;
  if (N + T > d.maxInvocations) return `its scan needs N + T = ${N + T} invocations, the device has ${d.maxInvocations} per workgroup`;
  if (invocations > d.maxInvocations) return `its prep needs ${invocations} invocations, the device has ${d.maxInvocations} per workgroup`;
  const wgBytes = Math.max(scanRows * (N + T) * 4, reduce === 'lane' ? 0 : invocations * 8);
  if (wgBytes > d.maxWorkgroupStorage) return `it needs ${wgBytes} bytes of workgroup memory, the device has ${d.maxWorkgroupStorage}`;
  // The scratch is sized for the largest batch of a runtime (or harness); a bare device description has none.
  const b = d.batch;
  if (b) {
    const bytes = chunkScratchFloats(T, b.heads, N, b.tokens, b.jobs) * 4;
    if (bytes > b.maxBindingBytes)
      return `its scratch for ${b.tokens} tokens in ${b.jobs} jobs of ${b.heads} heads is ${bytes} bytes, more than the device binds in one buffer (${b.maxBindingBytes}); use fewer tokens a step`;
  }
  return null;
}

/** The chunk variant's two dispatches (prep, then scan), each binding the scratch buffer as a sixth binding. */
export function chunkPasses(T: number, reduce: ChunkPrepSum, c: WkvConstants, bindings: BindingKind[], invocations: number = CHUNK_PREP_INVOCATIONS, flatScan = true): WkvPass[] {
  const N = c.N;
  const lanes = chunkPrepLanes(N);
  const prepRows = invocations / lanes;
  // The lane variants also take the scan as straight-line code (the others keep the scan they were measured with).
  const scan: WkvPass = {
    parts: ['head_common', 'wkv_bindings', 'wkv_chunk_scan_common', reduce === 'lane' ? 'rwkv7_wkv_chunk_scan_flat' : 'rwkv7_wkv_chunk_scan'],
    constants: { ...c, CHUNK: T, ...(reduce === 'lane' ? { QUADS: FLAT_SCAN_QUADS, ...chunkScanCode(N + T, FLAT_SCAN_QUADS, flatScan) } : {}) },
    bindings,
    scratch: true,
    dispatch: (H, J) => [(H * N) / (reduce === 'lane' ? 4 * FLAT_SCAN_QUADS : CHUNK_SCAN_ROWS), J],
  };
  if (reduce === 'lane') {
    const prep: WkvPass = {
      parts: ['head_common', 'wkv_chunk_span', 'rwkv7_wkv_chunk_prep_lane'],
      constants: { ...c, CHUNK: T, ...chunkLaneCode(N) },
      bindings,
      scratch: true,
      dispatch: (H, J, tokens) => [H, Math.max(1, wkvMaxChunks(T, tokens, J))],
    };
    return [prep, scan];
  }
  return [
    {
      parts: ['head_common', reduce === 'subgroup' ? 'wkv_rowsum_subgroup' : 'wkv_rowsum_shared', 'wkv_chunk_span', 'rwkv7_wkv_chunk_prep'],
      constants: { ...c, CHUNK: T, L: lanes, ROWS: prepRows },
      bindings,
      scratch: true,
      dispatch: (H, J, tokens) => [H * Math.ceil((N + T) / prepRows), Math.max(1, wkvMaxChunks(T, tokens, J))],
    },
    scan,
  ];
}
