// Probe (GPU machine): does a subgroup-matrix product that loads its 16×16 fragments straight from storage run
// faster when both operands are stored pre-tiled (each 16×16 block contiguous, 512 bytes) than the staged kernel
// (engine/rwkv7/matmul.ts, mm_sgstage.wgsl), which copies tiles into workgroup memory one f16 at a time?
// `node dist/bench/device/sgmat-layout-probe.js [--quick] [--only REGEX] [--shapes NxKxT,...] [--engine]`. Each
// variant is checked on sampled elements against float64 over the f16-rounded inputs before it is timed. Shapes are
// multiples of the tile, so no bounds code. --engine also times the engine's own tiled product (mm_sgtile), its
// input tiling and its reduction alone on the same data, and the product with the weights read as 16×16 blocks.
// Variant names: MTxNTxSGMxSGN, then A/a (activations tiled / row-major), W/w (weights), c (a row-major stride
// written as a literal), uN (K steps per loop trip), sN (K splits), -plain/-bcast (K read from a segment array).

import { acquireGpu } from '../../engine/gpu/device';
import { f16BitsToF32 } from '../../engine/loader/dtype';
import { PRODUCT_PROBE_HEADER, randomHalves, sampleProduct, sampledError, tile } from './probe-data';
import { GpuSpanTimer, calibrateRepetitions, median } from './gpu-span-timer';
import { bindGroup, makeKernel, type BindingKind, type Kernel } from '../../engine/gpu/kernel';
import { shaderSource } from '../../engine/gpu/shader-source';

/** A kernel from WGSL text with an explicit layout (makeKernel builds from shader parts). */
function kernelFromCode(device: GPUDevice, code: string, bindings: BindingKind[]): Kernel {
  const layout = device.createBindGroupLayout({
    entries: bindings.map((kind, binding) => ({
      binding,
      visibility: GPUShaderStage.COMPUTE,
      buffer: { type: kind === 'uniform' ? 'uniform' : kind === 'read' ? 'read-only-storage' : 'storage' },
    })),
  });
  const module = device.createShaderModule({ code });
  const pipeline = device.createComputePipeline({ layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }), compute: { module, entryPoint: 'main' } });
  return { name: 'probe', pipeline, layout, bindings };
}
import {
  groupUniform, matmulDispatch, matmulShader, splitReduceDispatch, splitReduceShader, tileInputDispatch, tileInputShader, type MatmulVariant,
} from '../../engine/rwkv7/matmul';

/** aConst/wConst: a row-major operand's stride written into the shader as a literal (the driver may specialise on it). */
interface Variant { mt: number; nt: number; sgm: number; sgn: number; aTiled: boolean; wTiled: boolean; unroll: number; aConst?: boolean; wConst?: boolean; split?: number; seg?: 'plain' | 'bcast' }
interface Shape { n: number; k: number; t: number }

function shader(v: Variant, k: number): string {
  // seg: K read as the engine reads it, from a uniform array of segments indexed by a workgroup-dependent loop
  // (plain), or that value passed through subgroupBroadcastFirst, which makes it provably subgroup-uniform (bcast).
  const aK = v.aConst ? `${k}u` : v.seg ? 'KS' : 'p.K';
  const wK = v.wConst ? `${k}u` : v.seg ? 'KS' : 'p.K';
  const aOff = v.aTiled ? '((tb0 + i) * KB + kb) * 256u' : `(tb0 + i) * 16u * ${aK} + kb * 16u`;
  const aStride = v.aTiled ? '16u' : aK;
  const wOff = v.wTiled ? '((ob0 + j) * KB + kb) * 256u' : `(ob0 + j) * 16u * ${wK} + kb * 16u`;
  const wStride = v.wTiled ? '16u' : wK;
  const split = v.split ?? 1;
  const step = (kbExpr: string) => `
    {
      let kb = ${kbExpr};
      var a: array<subgroup_matrix_left<f16, 16, 16>, MT>;
      for (var i = 0u; i < MT; i++) { a[i] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(&A, ${aOff}, ${aStride}); }
      for (var j = 0u; j < NT; j++) {
        let w = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>, col_major>(&W, ${wOff}, ${wStride});
        for (var i = 0u; i < MT; i++) { acc[i * NT + j] = subgroupMatrixMultiplyAccumulate(a[i], w, acc[i * NT + j]); }
      }
    }`;
  return `${PRODUCT_PROBE_HEADER}${v.seg ? 'struct G { segs: array<vec4<u32>, 8>, count: u32 }\n@group(0) @binding(4) var<uniform> g: G;' : ''}
const MT: u32 = ${v.mt}u;
const NT: u32 = ${v.nt}u;
const SGN: u32 = ${v.sgn}u;
@compute @workgroup_size(${32 * v.sgm * v.sgn})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(subgroup_id) sg: u32) {
  ${v.seg ? `var si = 0u;
  for (var i = 1u; i < g.count; i++) { if (wid.x * 64u >= g.segs[i].y) { si = i; } }
  let KS = ${v.seg === 'bcast' ? 'subgroupBroadcastFirst(g.segs[si].x)' : 'g.segs[si].x'};
  let KB = KS / 16u;` : 'let KB = p.K / 16u;'}
  let sm = sg / SGN;
  let sn = sg % SGN;
  let tb0 = (wid.y * ${v.sgm}u + sm) * MT;
  let ob0 = (wid.x * SGN + sn) * NT;
  var acc: array<subgroup_matrix_result<f32, 16, 16>, MT * NT>;
  let kspan = KB / ${split}u;
  for (var k0 = wid.z * kspan; k0 < (wid.z + 1u) * kspan; k0 += ${v.unroll}u) {
${Array.from({ length: v.unroll }, (_, u) => step(`k0 + ${u}u`)).join('\n')}
  }
  for (var i = 0u; i < MT; i++) {
    for (var j = 0u; j < NT; j++) {
      subgroupMatrixStore<row_major>(&Y, wid.z * p.T * p.N + (tb0 + i) * 16u * p.N + (ob0 + j) * 16u, acc[i * NT + j], p.N);
    }
  }
}
`;
}

function name(v: Variant): string {
  return `${v.mt}x${v.nt}x${v.sgm}x${v.sgn}${v.aTiled ? 'A' : v.aConst ? 'c' : 'a'}${v.wTiled ? 'W' : v.wConst ? 'c' : 'w'}u${v.unroll}${v.split ? `s${v.split}` : ''}${v.seg ? `-${v.seg}` : ''}`;
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  const gpu = await acquireGpu({ exactTimestamps: true, kernelPath: 'subgroup-matrix' });
  const { device } = gpu;
  console.log(`adapter: ${gpu.adapterName}`);
  const timer = new GpuSpanTimer(device);
  const shapes: Shape[] = [
    { n: 256, k: 256, t: 128 },
    { n: 2048, k: 2048, t: 512 },
    { n: 8192, k: 2048, t: 512 },
    { n: 2048, k: 8192, t: 512 },
    { n: 2048, k: 2048, t: 64 },
    { n: 8192, k: 2048, t: 64 },
    { n: 2048, k: 8192, t: 64 },
    { n: 2048, k: 2048, t: 16 },
    { n: 8192, k: 2048, t: 16 },
    { n: 2048, k: 8192, t: 32 },
    { n: 768, k: 768, t: 512 },
    { n: 3072, k: 768, t: 512 },
    { n: 768, k: 3072, t: 64 },
  ];
  const t2: Omit<Variant, 'aTiled' | 'wTiled'> = { mt: 2, nt: 2, sgm: 2, sgn: 2, unroll: 1 };
  const base: Variant[] = [
    { ...t2, aTiled: true, wTiled: true },
    { ...t2, aTiled: false, wTiled: false },
    { ...t2, aTiled: false, wTiled: false, aConst: true, wConst: true },
    { ...t2, aTiled: true, wTiled: false, wConst: true },
    { ...t2, aTiled: true, wTiled: false },
    { ...t2, aTiled: false, wTiled: true, aConst: true },
    { ...t2, mt: 1, nt: 2, sgm: 4, aTiled: true, wTiled: true },
    { ...t2, sgm: 1, sgn: 4, aTiled: true, wTiled: true },
    { ...t2, aTiled: true, wTiled: false, seg: 'plain' },
    { ...t2, aTiled: true, wTiled: false, seg: 'bcast' },
    ...[2, 4, 8].flatMap((split) => [
      { ...t2, aTiled: true, wTiled: true, split },
      { ...t2, aTiled: true, wTiled: false, wConst: true, split },
      { ...t2, mt: 1 as const, nt: 2, sgm: 4, aTiled: true, wTiled: true, split },
    ]),
  ];
  const only = process.argv.includes('--only') ? new RegExp(process.argv[process.argv.indexOf('--only') + 1]) : null;
  const shapeArg = process.argv.includes('--shapes') ? process.argv[process.argv.indexOf('--shapes') + 1].split(',') : null;
  const variants = (quick ? base.slice(0, 3) : base).filter((v) => !only || only.test(name(v)));
  if (shapeArg) shapes.splice(0, shapes.length, ...shapes.filter((sh) => shapeArg.includes(`${sh.n}x${sh.k}xT${sh.t}`)));
  const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  for (const sh of shapes) {
    const wBits = randomHalves(sh.n * sh.k, 7 + sh.n, 1 / Math.sqrt(sh.k));
    const aBits = randomHalves(sh.t * sh.k, 3 + sh.t, 1);
    const wT = tile(wBits, sh.n, sh.k);
    const aT = tile(aBits, sh.t, sh.k);
    const mk = (bits: Uint16Array) => { const b = device.createBuffer({ size: bits.byteLength, usage: S }); device.queue.writeBuffer(b, 0, bits); return b; };
    const wRow = mk(wBits), wTil = mk(wT), aRow = mk(aBits), aTil = mk(aT);
    const yBytes = sh.t * sh.n * 4 * 8;
    const y = device.createBuffer({ size: yBytes, usage: S });
    const read = device.createBuffer({ size: yBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const u = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(u, 0, new Uint32Array([sh.t, sh.n, sh.k, 0]));
    const segU = device.createBuffer({ size: 144, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(segU, 0, Uint32Array.from({ length: 36 }, (_, i) => (i === 0 ? sh.k : i === 32 ? 1 : 0)));
    // Sampled reference elements.
    const samples = sampleProduct(aBits, wBits, sh);
    for (const v of variants) {
      const bm = 16 * v.mt * v.sgm, bn = 16 * v.nt * v.sgn;
      const label = `${sh.n}x${sh.k}xT${sh.t} ${name(v)}`;
      const split = v.split ?? 1;
      if (sh.t % bm || sh.n % bn || (sh.k / 16) % (v.unroll * split)) { console.log(`${label}: skipped (shape not a tile multiple)`); continue; }
      try {
        device.pushErrorScope('validation');
        const module = device.createShaderModule({ code: shader(v, sh.k) });
        const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
        const bg = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [u, v.aTiled ? aTil : aRow, v.wTiled ? wTil : wRow, y, ...(v.seg ? [segU] : [])].map((buffer, binding) => ({ binding, resource: { buffer } })) });
        const err = await device.popErrorScope();
        if (err) throw new Error(err.message);
        const encode = (reps: number) => (enc: GPUCommandEncoder) => {
          const pass = enc.beginComputePass();
          pass.setPipeline(pipeline);
          pass.setBindGroup(0, bg);
          for (let r = 0; r < reps; r++) pass.dispatchWorkgroups(sh.n / bn, sh.t / bm, split);
          pass.end();
        };
        device.queue.writeBuffer(y, 0, new Float32Array(sh.t * sh.n * split).fill(NaN));
        const enc = device.createCommandEncoder();
        encode(1)(enc);
        enc.copyBufferToBuffer(y, 0, read, 0, yBytes);
        device.queue.submit([enc.finish()]);
        const t0 = Date.now();
        await Promise.race([read.mapAsync(GPUMapMode.READ), new Promise((_, rej) => setTimeout(() => rej(new Error('first run did not finish in 15 s')), 15000))]);
        const firstMs = Date.now() - t0;
        const out = new Float32Array(read.getMappedRange().slice(0));
        read.unmap();
        const rel = sampledError(out, samples, sh, split);
        if (!(rel < 2e-3)) throw new Error(`relative error ${rel.toExponential(2)}`);
        const reps = await calibrateRepetitions(timer, encode, 0.02, 2000);
        const spans: number[] = [];
        for (let i = 0; i < 3; i++) spans.push((await timer.time(encode(reps))) / reps);
        const sec = median(spans);
        console.log(JSON.stringify({ case: `${sh.n}x${sh.k}xT${sh.t}`, variant: name(v), us: +(sec * 1e6).toFixed(2), tflops: +((2 * sh.n * sh.k * sh.t) / sec / 1e12).toFixed(1), relErr: +rel.toExponential(2), firstMs }));
      } catch (e) {
        console.log(`${label}: FAILED ${(e as Error).message.split('\n')[0]}`);
        if (/did not finish/.test((e as Error).message)) process.exit(2);
      }
    }
    if (process.argv.includes('--engine')) {
      // The engine's own tiled product (matmul.ts), its input tiling and its reduction, each dispatched alone on
      // this data: the product reads the tiled A and writes its partial sums into y ([t][n] for one segment of a
      // width that is a multiple of 64, T a multiple of 64), so the same sampled check applies.
      try {
        const cfg = { kernelPath: 'subgroup-matrix' as const, precision: 'f16' as const, subgroup32: true };
        const variant: MatmulVariant = { kind: 'sgtile', mt: 2, nt: 2, sgm: 2, sgn: 2, split: 1 };
        const group = { buffer: wRow, format: 'f16' as const, segs: [{ name: 'W', n: sh.n, k: sh.k, wOff: 0 }] };
        const gu = groupUniform('probe', group, [{ xOff: 0, yOff: 0 }], false);
        const gBuf = device.createBuffer({ size: gu.words.byteLength, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
        device.queue.writeBuffer(gBuf, 0, gu.words);
        const bBuf = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
        device.queue.writeBuffer(bBuf, 0, new Uint32Array([sh.t, 1, sh.t, 0]));
        const xF = device.createBuffer({ size: sh.t * sh.k * 4, usage: S });
        const yOut = device.createBuffer({ size: sh.t * sh.n * 4, usage: S });
        const xtScratch = device.createBuffer({ size: sh.t * sh.k * 2, usage: S });
        const res = [bBuf, wRow, xF, yOut, gBuf, y, aTil];
        const prod = matmulShader(variant, cfg);
        // The engine's source with the weights read as 16×16 blocks (wTil bound): what tiled weights would give.
        const src = shaderSource(prod.parts, prod.constants);
        const tiledW = src
          .replace('let wbase = subgroupBroadcastFirst(s.w_off * 8u + (o0 + sn * NT * 16u) * k);', 'let wbase = subgroupBroadcastFirst(s.w_off * 8u + (o0 / 16u + sn * NT) * kblocks * 256u);')
          .replace('(&W, wbase + j * 16u * k + k0, true, k)', '(&W, wbase + (j * kblocks + kb) * 256u, true, 16u)');
        const stages: [string, { parts: string[]; constants: Record<string, import('../../engine/gpu/shader-source').ShaderConstant>; bindings: import('../../engine/gpu/kernel').BindingKind[]; code?: string }, number[], GPUBuffer[]][] = [
          ['engine-product', prod, matmulDispatch(variant, gu.virtualRows, sh.t), res],
          ...(tiledW !== src ? [['engine-product-tiledW', { ...prod, code: tiledW }, matmulDispatch(variant, gu.virtualRows, sh.t), [bBuf, wTil, xF, yOut, gBuf, y, aTil]] as [string, typeof prod & { code: string }, number[], GPUBuffer[]]] : []),
          ['engine-tile-x', tileInputShader(), tileInputDispatch([sh.k], sh.t), [bBuf, wRow, xF, yOut, gBuf, y, xtScratch]],
          ['engine-reduce', splitReduceShader(variant, cfg, sh.t), splitReduceDispatch(gu.virtualRows, sh.t), res],
        ];
        for (const [label, sh2, dispatch, resources] of stages) {
          device.pushErrorScope('validation');
          const kernel = sh2.code ? kernelFromCode(device, sh2.code, sh2.bindings) : makeKernel(device, sh2.parts, sh2.constants, sh2.bindings);
          const bg = bindGroup(device, kernel, resources);
          const err = await device.popErrorScope();
          if (err) throw new Error(`${label}: ${err.message}`);
          const encode = (reps: number) => (enc: GPUCommandEncoder) => {
            const pass = enc.beginComputePass();
            pass.setPipeline(kernel.pipeline);
            pass.setBindGroup(0, bg);
            for (let r = 0; r < reps; r++) pass.dispatchWorkgroups(dispatch[0], dispatch[1] ?? 1, dispatch[2] ?? 1);
            pass.end();
          };
          let rel: number | undefined;
          if (label.startsWith('engine-product')) {
            device.queue.writeBuffer(y, 0, new Float32Array(sh.t * sh.n).fill(NaN));
            const enc = device.createCommandEncoder();
            encode(1)(enc);
            enc.copyBufferToBuffer(y, 0, read, 0, sh.t * sh.n * 4);
            device.queue.submit([enc.finish()]);
            await read.mapAsync(GPUMapMode.READ);
            const out = new Float32Array(read.getMappedRange().slice(0));
            read.unmap();
            rel = sampledError(out, samples, sh);
          }
          const reps = await calibrateRepetitions(timer, encode, 0.02, 2000);
          const spans: number[] = [];
          for (let i = 0; i < 3; i++) spans.push((await timer.time(encode(reps))) / reps);
          const sec = median(spans);
          console.log(JSON.stringify({ case: `${sh.n}x${sh.k}xT${sh.t}`, variant: label, us: +(sec * 1e6).toFixed(2), ...(rel !== undefined ? { relErr: +rel.toExponential(2), tflops: +((2 * sh.n * sh.k * sh.t) / sec / 1e12).toFixed(1) } : {}) }));
        }
        for (const b of [gBuf, bBuf, xF, yOut, xtScratch]) b.destroy();
      } catch (e) {
        console.log(`${sh.n}x${sh.k}xT${sh.t} engine: FAILED ${(e as Error).message.split('\n')[0]}`);
      }
    }
    for (const b of [wRow, wTil, aRow, aTil, y, read, u, segU]) b.destroy();
  }
  timer.dispose();
  process.exit(0);
}

main().catch((e) => { console.error(e); process.exit(1); });
