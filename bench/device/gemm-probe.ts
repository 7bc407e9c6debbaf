// Probe (GPU machine): which subgroup-matrix product layout feeds the H200's tensor cores best, for prefill
// (512 tokens: compute-bound) and batched decode (64 tokens: bound by streaming the weights)?
// `node dist/bench/device/gemm-probe.js [--only REGEX] [--shapes NxKxT,...] [--rounds N] [--toggles a,b] [--print REGEX] [--cold N]`
// (--print: the WGSL only; --toggles: extra Dawn toggles, e.g. disable_robustness; --cold N: N copies of the weights,
// dispatches taking them in turn, so with N × the weights above the 50 MB L2 each product streams them from memory
// as the engine's layers do; --cold-one: the N copies as ranges of one buffer; --warm: each product followed by a
// kernel touching the next copy's pages, pageWarmer; --alias: N bind groups over one copy, to tell the footprint from
// the number of bind groups taken in turn; --hold MS: before each timed sample, the same work untimed for about MS
// ms, so the H200's SM clock has risen from its idle 345 MHz, bench/device/clocks.sh). Figures: the best of N
// interleaved rounds; --chain: each product after a dispatch that rewrites its activation blocks, inputRewriter).
// Both operands are stored as 16×16 f16 blocks (512 contiguous bytes each), as the engine's tiled product reads
// them (shaders/sgtile_layout.wgsl, wlayout_blocks.wgsl). Every variant is checked on sampled elements against
// float64 over the f16 inputs before it is timed; shapes are tile multiples, so no bounds code.
// Variants (name: family, then MTxNTxSGMxSGN — a workgroup of SGM×SGN subgroups, each owning MT×NT result tiles):
//   dir   every subgroup loads its 16×16 matrices straight from storage, as mm_sgtile.wgsl does (pf1: the next
//         step's matrices are loaded before this step's multiplies).
//   stg   the workgroup copies each stage of KC inputs (its BM tokens' and BN outputs' blocks) into workgroup
//         memory, double-buffered, one barrier a stage, and the subgroups load their matrices from there
//         (rows padded to KC + 8 halves against bank conflicts). Copy 'v': 16-byte loads of the blocks, stored
//         as 8 halves each; copy 'm': a subgroup loads a whole block as a matrix and stores it as one.
//   eng   the engine's own tiled product (engine/rwkv7/matmul.ts matmulShader, shaders/mm_sgtile.wgsl) for that tiling and
//         ku, on the same data: what the engine's kernel gives against the probe's of the same shape.
//   sN    N splits of K (partial sums added by the check, as the engine's reduction pass does).

import { acquireGpu } from '../../engine/gpu/device';
import { bindGroup, makeKernel } from '../../engine/gpu/kernel';
import { emulateSubgroupMatrices, isEmulating } from '../../engine/gpu/subgroup-matrix-emulation';
import { groupUniform, matmulDispatch, matmulShader } from '../../engine/rwkv7/matmul';
import { f16BitsToF32 } from '../../engine/loader/dtype';
import { GpuSpanTimer, calibrateRepetitions, median } from './gpu-span-timer';
import { PRODUCT_PROBE_HEADER, randomHalves, sampleProduct, sampledError, tile } from './probe-data';

interface Variant {
  family: 'dir' | 'stg' | 'mma' | 'eng' | 'rd';
  mt: number; nt: number; sgm: number; sgn: number;
  split: number;
  /** dir: prefetch the next step's matrices. */
  pf?: boolean;
  /** stg: inputs a stage, and how a stage is copied. */
  kc?: 32 | 64;
  copy?: 'v' | 'm';
  /** Straight-line code with one named variable per matrix (no arrays of matrices, no loops over tiles). */
  flat?: boolean;
  /** flat dir: steps of 16 inputs a loop trip. */
  ku?: number;
  /**
   * flat dir: software-pipelined trips — the next trip's matrices are loaded (into fresh registers) before this
   * trip's multiplies, so the loads of one trip are in flight while the tensor cores work on the one before.
   */
  pipe?: boolean;
  /** eng: K slices a workgroup (engine/rwkv7/tiled-slices.ts). */
  sk?: 1 | 2 | 4;
  /**
   * flat dir: weights stored input-block-major (block (ob, kb) at (kb · N/16 + ob) · 256), so at each step the
   * workgroups read neighbouring blocks, one window sweeping the matrix, instead of one stream per strip of 16 rows.
   */
  kmaj?: boolean;
  /** rd: the weights read and summed, no product: 'sweep' (the grid strides over the whole copy), 'strip' (each workgroup one contiguous range). */
  read?: 'sweep' | 'strip';
}
interface Shape { n: number; k: number; t: number }

const LEFT = 'subgroup_matrix_left<f16, 16, 16>';
const RIGHT = 'subgroup_matrix_right<f16, 16, 16>';

function name(v: Variant): string {
  if (v.family === 'rd') return `rd-${v.read}-w${v.mt}`;
  const tiles = `${v.mt}x${v.nt}x${v.sgm}x${v.sgn}`;
  const extra = v.family === 'dir' ? (v.pf ? '-pf1' : '') : v.family === 'mma' || v.family === 'eng' ? '' : `-k${v.kc}${v.copy}`;
  return `${v.family}${v.flat ? 'F' : ''}${tiles}${extra}${v.ku && v.ku > 1 ? `-u${v.ku}` : ''}${v.pipe ? '-pipe' : ''}${v.sk && v.sk > 1 ? `-q${v.sk}` : ''}${v.split > 1 ? `-s${v.split}` : ''}${v.kmaj ? '-kmaj' : ''}`;
}

const bm = (v: Variant) => 16 * v.mt * v.sgm;
const bn = (v: Variant) => 16 * v.nt * v.sgn;
const lanes = (v: Variant) => 32 * v.sgm * v.sgn;

/** Bytes of workgroup memory a staged variant needs (two stages of both tiles). */
function stagedBytes(v: Variant): number {
  return 2 * (bm(v) + bn(v)) * (v.kc! + 8) * 2;
}

const HEADER = `${PRODUCT_PROBE_HEADER}@group(0) @binding(4) var<storage, read> A4: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> W4: array<vec4<u32>>;
`;

/** Every probe kernel's start: K in blocks, the subgroup's place in the workgroup, the workgroup's first blocks. */
function tileOrigin(v: Variant): string {
  return `  let KB = p.K / 16u;
  let sm = sg / ${v.sgn}u;
  let sn = sg % ${v.sgn}u;
  let tb0 = wid.y * ${bm(v) / 16}u;
  let ob0 = wid.x * ${bn(v) / 16}u;`;
}

const STORE_RESULTS = `
  for (var i = 0u; i < MT; i++) {
    for (var j = 0u; j < NT; j++) {
      subgroupMatrixStore<row_major>(&Y, wid.z * p.T * p.N + (tb0 + sm * MT + i) * 16u * p.N + (ob0 + sn * NT + j) * 16u, acc[i * NT + j], p.N);
    }
  }`;

function directShader(v: Variant): string {
  const load = (kb: string, a: string, b: string) => `
    for (var i = 0u; i < MT; i++) { ${a}[i] = subgroupMatrixLoad<${LEFT}, row_major>(&A, ((tb0 + sm * MT + i) * KB + ${kb}) * 256u, 16u); }
    for (var j = 0u; j < NT; j++) { ${b}[j] = subgroupMatrixLoad<${RIGHT}, col_major>(&W, ((ob0 + sn * NT + j) * KB + ${kb}) * 256u, 16u); }`;
  const mma = (a: string, b: string) => `
    for (var j = 0u; j < NT; j++) {
      for (var i = 0u; i < MT; i++) { acc[i * NT + j] = subgroupMatrixMultiplyAccumulate(${a}[i], ${b}[j], acc[i * NT + j]); }
    }`;
  const body = v.pf
    ? `
  var a: array<${LEFT}, MT>;
  var b: array<${RIGHT}, NT>;
  ${load('kbs', 'a', 'b')}
  for (var kb = kbs; kb < kbe; kb++) {
    let nk = min(kb + 1u, kbe - 1u);
    var a2: array<${LEFT}, MT>;
    var b2: array<${RIGHT}, NT>;
    ${load('nk', 'a2', 'b2')}
    ${mma('a', 'b')}
    a = a2;
    b = b2;
  }`
    : `
  for (var kb = kbs; kb < kbe; kb++) {
    var a: array<${LEFT}, MT>;
    var b: array<${RIGHT}, NT>;
    ${load('kb', 'a', 'b')}
    ${mma('a', 'b')}
  }`;
  return `${HEADER}
const MT: u32 = ${v.mt}u;
const NT: u32 = ${v.nt}u;
const SGN: u32 = ${v.sgn}u;
@compute @workgroup_size(${lanes(v)})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(subgroup_id) sg: u32) {
${tileOrigin(v)}
  let kspan = KB / ${v.split}u;
  let kbs = wid.z * kspan;
  let kbe = kbs + kspan;
  var acc: array<subgroup_matrix_result<f32, 16, 16>, MT * NT>;
  ${body}
  ${STORE_RESULTS}
}
`;
}

/** Every (i, j) pair of a subgroup's MT × NT tiles. */
function pairs(v: Variant): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < v.mt; i++) for (let j = 0; j < v.nt; j++) out.push([i, j]);
  return out;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Stores of the named accumulators c_i_j. */
function flatStore(v: Variant): string {
  return pairs(v).map(([i, j]) => `  subgroupMatrixStore<row_major>(&Y, wid.z * p.T * p.N + (tb0 + sm * ${v.mt}u + ${i}u) * 16u * p.N + (ob0 + sn * ${v.nt}u + ${j}u) * 16u, c_${i}_${j}, p.N);`).join('\n');
}

function flatDirectShader(v: Variant): string {
  const ku = v.ku ?? 1;
  // Loads of step u at block `kb` into variables named with `prefix`, declared with `decl`.
  const step = (u: number, kb = 'kb', prefix = '', decl = 'let') => [
    ...range(v.mt).map((i) => `    ${decl} ${prefix}a${u}_${i} = subgroupMatrixLoad<${LEFT}, row_major>(&A, ((tb0 + sm * ${v.mt}u + ${i}u) * KB + ${kb} + ${u}u) * 256u, 16u);`),
    ...range(v.nt).map((j) => `    ${decl} ${prefix}b${u}_${j} = subgroupMatrixLoad<${RIGHT}, col_major>(&W, ${v.kmaj ? `((${kb} + ${u}u) * (p.N / 16u) + ob0 + sn * ${v.nt}u + ${j}u) * 256u` : `((ob0 + sn * ${v.nt}u + ${j}u) * KB + ${kb} + ${u}u) * 256u`}, 16u);`),
  ].join('\n');
  const mma = (u: number) => pairs(v).map(([i, j]) => `    c_${i}_${j} = subgroupMatrixMultiplyAccumulate(a${u}_${i}, b${u}_${j}, c_${i}_${j});`).join('\n');
  if (v.pipe) return pipelinedDirectShader(v, ku, step, mma);
  return flatKernel(v, `  for (var kb = kbs; kb < kbe; kb += ${ku}u) {
${range(ku).map((u) => step(u)).join('\n')}
${range(ku).map(mma).join('\n')}
  }`);
}

/** A flat direct kernel around `loop`: the subgroup's tiles, its K span [kbs, kbe) in blocks, named accumulators, their stores. */
function flatKernel(v: Variant, loop: string): string {
  return `${HEADER}
@compute @workgroup_size(${lanes(v)})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(subgroup_id) sg: u32) {
${tileOrigin(v)}
  let kspan = KB / ${v.split}u;
  let kbs = wid.z * kspan;
  let kbe = kbs + kspan;
${pairs(v).map(([i, j]) => `  var c_${i}_${j}: subgroup_matrix_result<f32, 16, 16>;`).join('\n')}
${loop}
${flatStore(v)}
}
`;
}

/**
 * The flat direct kernel with its trips software-pipelined: the matrices of the trip at kb live in `var`s loaded
 * before the loop; each trip loads the next trip's (kb + ku, clamped to the last trip, whose reload is never used)
 * into `let`s, multiplies the current ones, then moves the new ones in.
 */
function pipelinedDirectShader(v: Variant, ku: number, step: (u: number, kb: string, prefix: string, decl: string) => string, mma: (u: number) => string): string {
  const loadsAt = (kb: string, prefix: string, decl: string) => range(ku).map((u) => step(u, kb, prefix, decl)).join('\n');
  const names = range(ku).flatMap((u) => [...range(v.mt).map((i) => `a${u}_${i}`), ...range(v.nt).map((j) => `b${u}_${j}`)]);
  return flatKernel(v, `${loadsAt('kbs', '', 'var')}
  for (var kb = kbs; kb < kbe; kb += ${ku}u) {
    let nk = min(kb + ${ku}u, kbe - ${ku}u);
${loadsAt('nk', 'n', 'let')}
${range(ku).map(mma).join('\n')}
${names.map((m) => `    ${m} = n${m};`).join('\n')}
  }`);
}

/** The ceiling: the multiplies of a flat kernel on matrices loaded once, no loads in the loop (no check of results). */
function mmaOnlyShader(v: Variant): string {
  return `${HEADER}
@compute @workgroup_size(${lanes(v)})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(subgroup_id) sg: u32) {
${tileOrigin(v)}
${range(v.mt).map((i) => `  let a_${i} = subgroupMatrixLoad<${LEFT}, row_major>(&A, ((tb0 + sm * ${v.mt}u + ${i}u) * KB) * 256u, 16u);`).join('\n')}
${range(v.nt).map((j) => `  let b_${j} = subgroupMatrixLoad<${RIGHT}, col_major>(&W, ((ob0 + sn * ${v.nt}u + ${j}u) * KB) * 256u, 16u);`).join('\n')}
${pairs(v).map(([i, j]) => `  var c_${i}_${j}: subgroup_matrix_result<f32, 16, 16>;`).join('\n')}
  for (var kb = 0u; kb < KB / ${v.split}u; kb++) {
${pairs(v).map(([i, j]) => `    c_${i}_${j} = subgroupMatrixMultiplyAccumulate(a_${i}, b_${j}, c_${i}_${j});`).join('\n')}
  }
${flatStore(v)}
}
`;
}

/**
 * rd: the weight copy read as vec4<u32> by v.mt × 256 workgroups of 256 lanes and summed into Y (kept so the
 * loads stay): 'sweep' strides the grid over the whole copy, as the WGSL read probe does; 'strip' gives each
 * workgroup one contiguous range, as a product with one stream per strip of rows reads.
 */
function readShader(v: Variant): string {
  const groups = v.mt * 256;
  const index = v.read === 'sweep' ? `(i * ${groups}u + wid.x) * 256u + lid` : `wid.x * per + i * 256u + lid`;
  return `${HEADER}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let total = arrayLength(&W4);
  let per = total / ${groups}u;
  var acc = vec4<u32>(0u);
  for (var i = 0u; i < per / 256u; i++) { acc += W4[${index}]; }
  let s = acc.x + acc.y + acc.z + acc.w;
  if (s == 12345u) { Y[wid.x * 256u + lid] = f32(s); }
}
`;
}

function shaderOf(v: Variant): string {
  if (v.family === 'rd') return readShader(v);
  if (v.family === 'eng') return `// the engine's shader: ${JSON.stringify(engineShader(v).parts)}`;
  if (v.family === 'mma') return mmaOnlyShader(v);
  if (v.family === 'dir') return v.flat ? flatDirectShader(v) : directShader(v);
  return stagedShader(v);
}

/** Bytes between the loads of the page warmer (--warm): the smallest page a GPU maps. */
const WARM_STRIDE = 4096;

/**
 * --warm: a kernel that loads one word of every 4 KB of a weight copy and keeps nothing (the words go into a
 * workgroup atomic, which no driver drops), so its only binding is read-only: dispatched after a product, it can
 * run beside it and have the next copy's address translations cached before the next product needs them.
 */
function pageWarmer(device: GPUDevice, copies: { buffer: GPUBuffer; offset: number; size: number }[]) {
  const words = copies[0].size / 4;
  const code = `@group(0) @binding(0) var<storage, read> W: array<u32>;
var<workgroup> sink: atomic<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x * ${WARM_STRIDE / 4}u;
  if (i < ${words}u) { atomicAdd(&sink, W[i]); }
}`;
  const layout = device.createBindGroupLayout({ entries: [{ binding: 0, visibility: GPUShaderStage.COMPUTE, buffer: { type: 'read-only-storage' } }] });
  const pipeline = device.createComputePipeline({ layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }), compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
  const groups = copies.map((c) => device.createBindGroup({ layout, entries: [{ binding: 0, resource: c }] }));
  return { pipeline, groups, workgroups: Math.ceil(copies[0].size / WARM_STRIDE / 64) };
}

/**
 * --chain: a kernel that rewrites the product's activation blocks (from a copy, same values) before each product,
 * as the engine's input-tiling pass does, so every product reads an input the previous dispatch wrote.
 */
function inputRewriter(device: GPUDevice, src: GPUBuffer, dst: GPUBuffer) {
  const vec4s = dst.size / 16;
  const code = `@group(0) @binding(0) var<storage, read> S: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> D: array<vec4<u32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  if (gid.x < ${vec4s}u) { D[gid.x] = S[gid.x]; }
}`;
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
  const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: dst } }] });
  return { pipeline, group, workgroups: Math.ceil(vec4s / 256) };
}

/** The engine's tiled product for an 'eng' variant, over weights stored as 16×16 blocks. */
function engineShader(v: Variant) {
  return matmulShader(
    { kind: 'sgtile', mt: v.mt as 1 | 2 | 4, nt: v.nt as 1 | 2 | 4, sgm: v.sgm as 1 | 2 | 4, sgn: v.sgn as 1 | 2 | 4, split: v.split, ku: v.ku as 1 | 2 | 4, pipe: v.pipe ?? false, sk: v.sk ?? 1 },
    { kernelPath: 'subgroup-matrix', precision: 'f16', subgroup32: true, layout: 'blocks' },
  );
}

function stagedShader(v: Variant): string {
  const BM = bm(v), BN = bn(v), LANES = lanes(v), KC = v.kc!, KCB = KC / 16, SGS = v.sgm * v.sgn;
  // The two operands a stage copies: activations (token blocks from tb0, left matrices) and weights (output
  // blocks from ob0, right matrices, column-major), each with its own registers and workgroup tile.
  const operands = [
    { name: 'a', src: 'A', origin: 'tb0', shared: 'xs', rows: 'BM', blocks: (BM / 16) * KCB, type: LEFT, colMajor: false },
    { name: 'w', src: 'W', origin: 'ob0', shared: 'ws', rows: 'BN', blocks: (BN / 16) * KCB, type: RIGHT, colMajor: true },
  ];
  const each = (f: (op: (typeof operands)[number]) => string) => operands.map(f).join('');
  let decl: string, load: string, store: string;
  if (v.copy === 'v') {
    // 16-byte parts: part e of a block is row (e % 32) / 2, halves 8·(e % 2) .. +7 of it.
    const units = (op: (typeof operands)[number]) => (op.blocks * 32) / LANES;
    decl = operands.map((op) => `var r${op.name}: array<vec4<u32>, ${units(op)}>;`).join('\n  ');
    load = each((op) => `
    for (var u = 0u; u < ${units(op)}u; u++) {
      let e = lid + u * ${LANES}u;
      let blk = e / 32u;
      r${op.name}[u] = ${op.src}4[((${op.origin} + blk / KCB) * KB + kb0 + blk % KCB) * 32u + e % 32u];
    }`);
    store = each((op) => `
    for (var u = 0u; u < ${units(op)}u; u++) {
      let e = lid + u * ${LANES}u;
      let blk = e / 32u;
      let part = e % 32u;
      let d = buf * ${op.rows} * KS + ((blk / KCB) * 16u + part / 2u) * KS + (blk % KCB) * 16u + (part % 2u) * 8u;
      let q = r${op.name}[u];
      for (var c = 0u; c < 4u; c++) {
        let h = bitcast<vec2<f16>>(q[c]);
        ${op.shared}[d + 2u * c] = h.x;
        ${op.shared}[d + 2u * c + 1u] = h.y;
      }
    }`);
  } else {
    // Whole blocks: subgroup sg copies blocks sg, sg + SGS, ... as matrices.
    const units = (op: (typeof operands)[number]) => op.blocks / SGS;
    decl = operands.map((op) => `var m${op.name}: array<${op.type}, ${units(op)}>;`).join('\n  ');
    load = each((op) => `
    for (var u = 0u; u < ${units(op)}u; u++) {
      let blk = sg + u * ${SGS}u;
      m${op.name}[u] = subgroupMatrixLoad<${op.type}, ${op.colMajor ? 'col_major' : 'row_major'}>(&${op.src}, ((${op.origin} + blk / KCB) * KB + kb0 + blk % KCB) * 256u, 16u);
    }`);
    store = each((op) => `
    for (var u = 0u; u < ${units(op)}u; u++) {
      let blk = sg + u * ${SGS}u;
      subgroupMatrixStore<${op.colMajor ? 'col_major' : 'row_major'}>(&${op.shared}, buf * ${op.rows} * KS + (blk / KCB) * 16u * KS + (blk % KCB) * 16u, m${op.name}[u], KS);
    }`);
  }
  return `${HEADER}
const MT: u32 = ${v.mt}u;
const NT: u32 = ${v.nt}u;
const SGN: u32 = ${v.sgn}u;
const BM: u32 = ${BM}u;
const BN: u32 = ${BN}u;
const KCB: u32 = ${KCB}u;
const KS: u32 = ${KC + 8}u;
var<workgroup> xs: array<f16, ${2 * BM * (KC + 8)}>;
var<workgroup> ws: array<f16, ${2 * BN * (KC + 8)}>;

@compute @workgroup_size(${LANES})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32, @builtin(subgroup_id) sg: u32) {
${tileOrigin(v)}
  let kspan = KB / ${v.split}u;
  let kbs = wid.z * kspan;
  let nst = kspan / KCB;
  ${v.flat ? pairs(v).map(([i, j]) => `var c_${i}_${j}: subgroup_matrix_result<f32, 16, 16>;`).join('\n  ') : `var acc: array<subgroup_matrix_result<f32, 16, 16>, MT * NT>;`}
  ${decl}
  {
    let kb0 = kbs;
    ${load}
    let buf = 0u;
    ${store}
  }
  workgroupBarrier();
  for (var st = 0u; st < nst; st++) {
    let cur = st % 2u;
    let more = st + 1u < nst;
    if (more) {
      let kb0 = kbs + (st + 1u) * KCB;
      ${load}
    }
    ${v.flat ? flatStagedCompute(v) : `for (var kk = 0u; kk < KCB; kk++) {
      var a: array<${LEFT}, MT>;
      for (var i = 0u; i < MT; i++) {
        a[i] = subgroupMatrixLoad<${LEFT}, row_major>(&xs, cur * BM * KS + (sm * MT + i) * 16u * KS + kk * 16u, KS);
      }
      for (var j = 0u; j < NT; j++) {
        let w = subgroupMatrixLoad<${RIGHT}, col_major>(&ws, cur * BN * KS + (sn * NT + j) * 16u * KS + kk * 16u, KS);
        for (var i = 0u; i < MT; i++) { acc[i * NT + j] = subgroupMatrixMultiplyAccumulate(a[i], w, acc[i * NT + j]); }
      }
    }`}
    if (more) {
      let buf = 1u - cur;
      ${store}
    }
    workgroupBarrier();
  }
  ${v.flat ? flatStore(v) : STORE_RESULTS}
}
`;
}

/** The staged kernel's multiplies of one stage as straight-line code on named matrices. */
function flatStagedCompute(v: Variant): string {
  const kcb = v.kc! / 16;
  const lines: string[] = [];
  for (let kk = 0; kk < kcb; kk++) {
    for (let i = 0; i < v.mt; i++) lines.push(`let a${kk}_${i} = subgroupMatrixLoad<${LEFT}, row_major>(&xs, cur * BM * KS + (sm * MT + ${i}u) * 16u * KS + ${kk * 16}u, KS);`);
    for (let j = 0; j < v.nt; j++) lines.push(`let b${kk}_${j} = subgroupMatrixLoad<${RIGHT}, col_major>(&ws, cur * BN * KS + (sn * NT + ${j}u) * 16u * KS + ${kk * 16}u, KS);`);
  }
  for (let kk = 0; kk < kcb; kk++) for (const [i, j] of pairs(v)) lines.push(`c_${i}_${j} = subgroupMatrixMultiplyAccumulate(a${kk}_${i}, b${kk}_${j}, c_${i}_${j});`);
  return lines.join('\n    ');
}

/** Why a variant cannot run a shape, or null. */
function unfit(v: Variant, sh: Shape, maxShared: number): string | null {
  if (v.family === 'rd') return sh.n * sh.k % (v.mt * 256 * 256 * 8) ? 'copy not a multiple of the grid' : null;
  if (sh.t % bm(v) || sh.n % bn(v)) return 'shape not a tile multiple';
  const kb = sh.k / 16;
  if (kb % v.split) return 'K not a multiple of the splits';
  if ((kb / v.split) % (v.ku ?? 1)) return 'K span not a multiple of the unroll';
  // Splits are for filling the GPU: long products at 512 tokens have enough tiles without more than two.
  if (v.split > 2 && sh.t > 64 && sh.k < 8192) return 'not worth splitting';
  if (v.family === 'stg') {
    const kcb = v.kc! / 16;
    if ((kb / v.split) % kcb) return 'K span not a multiple of the stage';
    if (stagedBytes(v) > maxShared) return `needs ${stagedBytes(v)} bytes of workgroup memory`;
    const ablk = (bm(v) / 16) * kcb, wblk = (bn(v) / 16) * kcb, sgs = v.sgm * v.sgn;
    if (v.copy === 'v' && ((ablk * 32) % lanes(v) || (wblk * 32) % lanes(v))) return 'blocks do not spread evenly over lanes';
    if (v.copy === 'm' && (ablk % sgs || wblk % sgs)) return 'blocks do not spread evenly over subgroups';
  }
  return null;
}

function variants(): Variant[] {
  const out: Variant[] = [];
  const t = (mt: number, nt: number, sgm: number, sgn: number) => ({ mt, nt, sgm, sgn });
  for (const tiles of [t(2, 2, 2, 2), t(4, 4, 1, 1), t(4, 2, 2, 4), t(2, 2, 4, 4)]) out.push({ family: 'mma', flat: true, ...tiles, split: 1 });
  for (const read of ['sweep', 'strip'] as const) for (const w of [1, 4]) out.push({ family: 'rd', ...t(w, 1, 1, 1), split: 1, read });
  for (const split of [1, 2, 4, 8]) {
    // Split only: unsplit, the engine's product stores its results through store() into y, not into the probe's Y.
    for (const ku of split > 1 ? [1, 2, 4] : []) {
      for (const tiles of [t(2, 2, 2, 2), t(4, 2, 1, 2), t(4, 1, 1, 4), t(4, 4, 1, 1)]) out.push({ family: 'eng', flat: true, ...tiles, split, ku });
      // The engine's kernel with pipelined trips, and with 2 or 4 slices of K a workgroup (fewer splits for as many
      // subgroups: compare eng…-s4 with eng…-q2-s2 and eng…-q4).
      for (const tiles of [t(2, 2, 2, 2), t(4, 2, 1, 2), t(4, 4, 1, 1)]) {
        out.push({ family: 'eng', flat: true, ...tiles, split, ku, pipe: true });
        for (const sk of [2, 4] as const) if (32 * tiles.sgm * tiles.sgn * sk <= 256) out.push({ family: 'eng', flat: true, ...tiles, split, ku, sk });
      }
    }
    for (const pf of [false, true]) {
      out.push({ family: 'dir', ...t(2, 2, 2, 2), split, pf });
      out.push({ family: 'dir', ...t(4, 1, 1, 4), split, pf });
      out.push({ family: 'dir', ...t(4, 2, 1, 2), split, pf });
      out.push({ family: 'dir', ...t(4, 4, 1, 1), split, pf });
    }
    for (const ku of [1, 2, 4]) {
      out.push({ family: 'dir', flat: true, ...t(2, 2, 2, 2), split, ku });
      out.push({ family: 'dir', flat: true, ...t(4, 1, 1, 4), split, ku });
      out.push({ family: 'dir', flat: true, ...t(4, 4, 1, 1), split, ku });
      out.push({ family: 'dir', flat: true, ...t(4, 2, 1, 2), split, ku });
      out.push({ family: 'dir', flat: true, ...t(2, 4, 2, 1), split, ku });
      for (const tiles of [t(2, 2, 2, 2), t(4, 2, 1, 2), t(4, 4, 1, 1), t(2, 4, 2, 1), t(4, 2, 2, 2), t(2, 2, 4, 4)]) out.push({ family: 'dir', flat: true, ...tiles, split, ku, pipe: true });
      for (const tiles of [t(2, 2, 2, 2), t(4, 2, 1, 2), t(4, 1, 1, 4), t(4, 4, 1, 1)]) out.push({ family: 'dir', flat: true, ...tiles, split, ku, kmaj: true });
      // Workgroup tiles past 64 × 64 (the engine's limit: TILE_TOKENS, SEGMENT_ALIGN). A 64 × 64 tile reads both
      // operands from L2 once per 64 outputs or tokens: 1/32 byte a FLOP, about 4.3 TB/s for the 1.5B FFN key at 512
      // tokens in 126 µs, near what L2 gives; subgroups of one workgroup loading the same blocks may share them in L1.
      for (const tiles of [t(4, 4, 2, 2), t(4, 4, 1, 2), t(4, 4, 2, 1), t(2, 4, 2, 2), t(4, 2, 2, 2)]) {
        out.push({ family: 'dir', flat: true, ...tiles, split, ku });
        out.push({ family: 'dir', flat: true, ...tiles, split, ku, kmaj: true });
      }
    }
    for (const kc of [32, 64] as const) {
      out.push({ family: 'stg', flat: true, ...t(2, 2, 2, 4), split, kc, copy: 'v' });
      out.push({ family: 'stg', flat: true, ...t(4, 2, 2, 4), split, kc, copy: 'v' });
      out.push({ family: 'stg', flat: true, ...t(4, 4, 2, 2), split, kc, copy: 'v' });
      out.push({ family: 'stg', flat: true, ...t(2, 2, 2, 2), split, kc, copy: 'v' });
    }
    for (const kc of [32, 64] as const) {
      for (const copy of ['v', 'm'] as const) {
        out.push({ family: 'stg', ...t(2, 2, 2, 2), split, kc, copy });
        out.push({ family: 'stg', ...t(4, 1, 1, 4), split, kc, copy });
        out.push({ family: 'stg', ...t(2, 2, 2, 4), split, kc, copy });
        out.push({ family: 'stg', ...t(2, 2, 4, 2), split, kc, copy });
        out.push({ family: 'stg', ...t(4, 2, 2, 4), split, kc, copy });
        out.push({ family: 'stg', ...t(4, 4, 2, 2), split, kc, copy });
      }
    }
  }
  return out;
}

async function main(): Promise<void> {
  if (process.argv.includes('--print')) {
    // The WGSL of the variants --only selects, without a GPU (to read what a variant compiles).
    const re = new RegExp(process.argv[process.argv.indexOf('--print') + 1]);
    for (const v of variants().filter((x) => re.test(name(x)))) console.log(`// ${name(v)}\n${shaderOf(v)}`);
    return;
  }
  const extraToggles = process.argv.includes('--toggles') ? process.argv[process.argv.indexOf('--toggles') + 1].split(',') : [];
  const rounds = process.argv.includes('--rounds') ? Number(process.argv[process.argv.indexOf('--rounds') + 1]) : 5;
  const cold = process.argv.includes('--cold') ? Number(process.argv[process.argv.indexOf('--cold') + 1]) : 1;
  if (!(Number.isInteger(cold) && cold >= 1)) throw new Error('--cold: give a whole number of weight copies, 1 or more');
  const coldOne = process.argv.includes('--cold-one');
  const warmPages = process.argv.includes('--warm');
  const alias = process.argv.includes('--alias');
  const chain = process.argv.includes('--chain');
  const hold = process.argv.includes('--hold') ? Number(process.argv[process.argv.indexOf('--hold') + 1]) : 0;
  if (!(hold >= 0 && hold <= 5000)) throw new Error('--hold: give milliseconds from 0 to 5000');
  console.log(`weights: ${cold} cop${cold > 1 ? 'ies taken in turn' : 'y'}${coldOne ? ', ranges of one buffer' : ''}${alias ? ', all one buffer (bind groups only)' : ''}`);
  const gpu = await acquireGpu({ exactTimestamps: true, kernelPath: 'subgroup-matrix', extraToggles });
  console.log(`toggles: ${gpu.dawnToggles.join(',')}`);
  const { device } = gpu;
  const maxShared = device.limits.maxComputeWorkgroupStorageSize;
  console.log(`adapter: ${gpu.adapterName}; workgroup memory ${maxShared} bytes`);
  const timer = new GpuSpanTimer(device);
  const shapes: Shape[] = [
    { n: 2048, k: 2048, t: 512 },
    { n: 8192, k: 2048, t: 512 },
    { n: 2048, k: 8192, t: 512 },
    { n: 2048, k: 2048, t: 64 },
    { n: 8192, k: 2048, t: 64 },
    { n: 2048, k: 8192, t: 64 },
  ];
  const only = process.argv.includes('--only') ? new RegExp(process.argv[process.argv.indexOf('--only') + 1]) : null;
  const shapeArg = process.argv.includes('--shapes') ? process.argv[process.argv.indexOf('--shapes') + 1].split(',') : null;
  const list = variants().filter((v) => !only || only.test(name(v)));
  const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  const layout = device.createBindGroupLayout({
    entries: ['uniform', 'read', 'read', 'storage', 'read', 'read'].map((kind, binding) => ({
      binding,
      visibility: GPUShaderStage.COMPUTE,
      buffer: { type: kind === 'uniform' ? 'uniform' : kind === 'read' ? 'read-only-storage' : 'storage' } as GPUBufferBindingLayout,
    })),
  });
  const pipelineLayout = device.createPipelineLayout({ bindGroupLayouts: [layout] });
  // --shapes names any NxKxT<tokens> (smaller ones check variants where products run slowly, e.g. emulated).
  const chosen = shapeArg
    ? shapeArg.map((a) => {
        const m = /^(\d+)x(\d+)xT(\d+)$/.exec(a);
        if (!m) throw new Error(`--shapes: '${a}' is not NxKxT<tokens>`);
        return { n: Number(m[1]), k: Number(m[2]), t: Number(m[3]) };
      })
    : shapes;
  for (const sh of chosen) {
    const shapeName = `${sh.n}x${sh.k}xT${sh.t}`;
    const wBits = randomHalves(sh.n * sh.k, 7 + sh.n, 1 / Math.sqrt(sh.k));
    const aBits = randomHalves(sh.t * sh.k, 3 + sh.t, 1);
    const mk = (bits: Uint16Array) => { const b = device.createBuffer({ size: bits.byteLength, usage: S }); device.queue.writeBuffer(b, 0, bits); return b; };
    const wTil = mk(tile(wBits, sh.n, sh.k)), aTil = mk(tile(aBits, sh.t, sh.k));
    const yBytes = sh.t * sh.n * 4 * 8;
    const y = device.createBuffer({ size: yBytes, usage: S });
    const read = device.createBuffer({ size: yBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const u = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(u, 0, new Uint32Array([sh.t, sh.n, sh.k, 0]));
    // The weights' copies: each its own buffer, or (--cold-one) ranges of one buffer.
    const wBytes = wTil.size;
    const whole = coldOne ? device.createBuffer({ size: wBytes * cold, usage: S }) : null;
    if (whole) for (let c = 0; c < cold; c++) device.queue.writeBuffer(whole, c * wBytes, tile(wBits, sh.n, sh.k));
    const copies: { buffer: GPUBuffer; offset: number; size: number }[] = whole
      ? Array.from({ length: cold }, (_, c) => ({ buffer: whole, offset: c * wBytes, size: wBytes }))
      : alias
        ? Array.from({ length: cold }, () => ({ buffer: wTil, offset: 0, size: wBytes }))
        : [wTil, ...Array.from({ length: cold - 1 }, () => mk(tile(wBits, sh.n, sh.k)))].map((buffer) => ({ buffer, offset: 0, size: wBytes }));
    const groupsOver = (cs: typeof copies) => cs.map((w) => device.createBindGroup({ layout, entries: [{ buffer: u }, { buffer: aTil }, w, { buffer: y }, { buffer: aTil }, w].map((resource, binding) => ({ binding, resource })) }));
    const bgs = groupsOver(copies);
    // kmaj variants: the same number of copies (separate buffers) in the input-block-major order.
    const kmajCopies = list.some((v) => v.kmaj)
      ? Array.from({ length: alias ? 1 : cold }, () => ({ buffer: mk(tile(wBits, sh.n, sh.k, 'input')), offset: 0, size: wBytes }))
      : [];
    const bgsK = groupsOver(alias ? Array.from({ length: cold }, () => kmajCopies[0]) : kmajCopies);
    const samples = sampleProduct(aBits, wBits, sh);
    const warmer = warmPages ? pageWarmer(device, copies) : null;
    const rewriter = chain ? inputRewriter(device, mk(tile(aBits, sh.t, sh.k)), aTil) : null;
    // What the engine's kernels ('eng') read besides the operands: the batch and the group's one segment.
    const uni = (words: Uint32Array) => { const b = device.createBuffer({ size: words.byteLength, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST }); device.queue.writeBuffer(b, 0, words); return b; };
    const engBatch = uni(new Uint32Array([sh.t, 1, sh.t, 0]));
    const engGroup = uni(groupUniform('probe', { buffer: wTil, format: 'f16', layout: 'blocks', segs: [{ name: 'W', n: sh.n, k: sh.k, wOff: 0 }] }, [{ xOff: 0, yOff: 0 }], false).words);
    // x and y are bound but not read by the product; two buffers, since one bound both read-only and writable is refused.
    const engX = device.createBuffer({ size: 256, usage: S });
    const engY = device.createBuffer({ size: 256, usage: S });
    // Checked and calibrated first, then timed in interleaved rounds: the machine's speed drifts (a run of this
    // probe saw the same kernel 3–4× slower for a stretch), so every variant gets a sample in every round.
    const timed: { v: Variant; encode: (enc: GPUCommandEncoder) => void; reps: number; rel: number; spans: number[] }[] = [];
    for (const v of list) {
      const label = `${shapeName} ${name(v)}`;
      const why = unfit(v, sh, maxShared);
      if (why) continue;
      try {
        device.pushErrorScope('validation');
        let pipeline: GPUComputePipeline;
        let groups = bgs;
        let grid: [number, number, number] = v.family === 'rd' ? [v.mt * 256, 1, 1] : [sh.n / bn(v), sh.t / bm(v), v.split];
        if (v.kmaj) groups = bgsK;
        if (v.family === 'eng') {
          // The engine's bindings: batch, weights, x, y, group, partial sums (the probe's Y: for one segment of a
          // width that is a multiple of 64 and T a multiple of 64 its layout is [split][T][N]), tiled inputs.
          const es = engineShader(v);
          const kernel = makeKernel(device, es.parts, es.constants, es.bindings);
          pipeline = kernel.pipeline;
          groups = copies.map((w) => bindGroup(device, kernel, [engBatch, w, engX, engY, engGroup, y, aTil]));
          grid = matmulDispatch({ kind: 'sgtile', mt: v.mt as 1, nt: v.nt as 1, sgm: v.sgm as 1, sgn: v.sgn as 1, split: v.split }, sh.n, sh.t);
        } else {
          // Emulated where the device has no subgroup matrices (RWKV_FLOW_EMULATE_SUBGROUP_MATRIX: checks, not timings).
          const module = device.createShaderModule({ code: isEmulating(device) ? emulateSubgroupMatrices(shaderOf(v)) : shaderOf(v) });
          pipeline = device.createComputePipeline({ layout: pipelineLayout, compute: { module, entryPoint: 'main' } });
        }
        const err = await device.popErrorScope();
        if (err) throw new Error(err.message);
        const encode = (reps: number) => (enc: GPUCommandEncoder) => {
          const pass = enc.beginComputePass();
          for (let r = 0; r < reps; r++) {
            if (rewriter) {
              pass.setPipeline(rewriter.pipeline);
              pass.setBindGroup(0, rewriter.group);
              pass.dispatchWorkgroups(rewriter.workgroups);
            }
            pass.setPipeline(pipeline);
            pass.setBindGroup(0, groups[r % groups.length]);
            pass.dispatchWorkgroups(...grid);
            if (warmer) {
              // The next copy's pages touched while this product runs (its only binding is read-only, so no
              // barrier keeps it from overlapping); the next product's barrier on Y waits for both.
              pass.setPipeline(warmer.pipeline);
              pass.setBindGroup(0, warmer.groups[(r + 1) % warmer.groups.length]);
              pass.dispatchWorkgroups(warmer.workgroups);
            }
          }
          pass.end();
        };
        device.queue.writeBuffer(y, 0, new Float32Array(sh.t * sh.n * v.split).fill(NaN));
        // An invalid command buffer runs nothing and would leave the last variant's results in `read`: refused here.
        device.pushErrorScope('validation');
        const enc = device.createCommandEncoder();
        encode(1)(enc);
        enc.copyBufferToBuffer(y, 0, read, 0, yBytes);
        device.queue.submit([enc.finish()]);
        const runErr = await device.popErrorScope();
        if (runErr) throw new Error(`first run: ${runErr.message}`);
        await Promise.race([read.mapAsync(GPUMapMode.READ), new Promise((_, rej) => setTimeout(() => rej(new Error('first run did not finish in 15 s')), 15000))]);
        const out = new Float32Array(read.getMappedRange().slice(0));
        read.unmap();
        const rel = sampledError(out, samples, sh, v.split);
        if (v.family !== 'mma' && v.family !== 'rd' && !(rel < 2e-3)) throw new Error(`relative error ${rel.toExponential(2)}`);
        const reps = await calibrateRepetitions(timer, encode, 0.01, 2000);
        timed.push({ v, encode: encode(reps), reps, rel, spans: [] });
      } catch (e) {
        console.log(`${label}: FAILED ${(e as Error).message.split('\n').slice(0, 3).join(' | ')}`);
        if (/did not finish/.test((e as Error).message)) process.exit(2);
      }
    }
    for (let r = 0; r < rounds; r++) {
      for (const x of timed) {
        // --hold: the same work for about `hold` ms first, untimed, so the SM clock is up when the round is timed.
        if (hold > 0) await timer.time((enc) => { for (let i = 0; i < Math.ceil(hold / 10); i++) x.encode(enc); });
        x.spans.push((await timer.time(x.encode)) / x.reps);
      }
    }
    for (const x of timed) {
      const best = Math.min(...x.spans), med = median(x.spans);
      console.log(JSON.stringify({
        case: shapeName, variant: name(x.v), us: +(best * 1e6).toFixed(2), medianUs: +(med * 1e6).toFixed(2),
        tflops: +((2 * sh.n * sh.k * sh.t) / best / 1e12).toFixed(1), weightGBs: Math.round((sh.n * sh.k * 2) / best / 1e9), relErr: +x.rel.toExponential(2),
      }));
    }
    for (const b of [...new Set([wTil, ...copies.map((c) => c.buffer), ...kmajCopies.map((c) => c.buffer)]), aTil, y, read, u, engBatch, engGroup, engX, engY]) b.destroy();
  }
  timer.dispose();
  process.exit(0);
}

main().catch((e) => { console.error(e); process.exit(1); });
