/// <reference types="@webgpu/types" />
// What a chain of dependent dispatches costs on this device, as a decode step at batch 1 runs them (one compute
// pass, each dispatch reading what the one before wrote, so Dawn puts a barrier between every two):
//  - empty links: one workgroup (or 256) doing almost nothing, N in a chain: the floor a dispatch costs;
//  - read links: each dispatch reads a region of its own (no L2 reuse across the chain, like a step's weights)
//    with a given number of workgroups and loads a trip: how fast an 8 MB (2048² f16) or 32 MB (8192×2048)
//    product's reads can go inside a chain, against the read probe's 4.5 TB/s for one long read.
// Every read link's sum is checked against the CPU's, so a link that skipped data cannot report a speed.
//
//   node dist/bench/device/dispatch-chain.js [--bytes N] [--out FILE] [--deadline SECONDS]

import { writeFileSync } from 'node:fs';
import { acquireBenchGpu } from './acquire-gpu';
import { GpuSpanTimer, median } from './gpu-span-timer';
import { exitAfter, progress } from './progress';
import { fillRandom } from './random-fill';

const WG = 256;

/** A link that reads a u32 counter, adds one and writes it (workgroup 0, lane 0); other workgroups write their slot. */
const EMPTY = /* wgsl */ `
@group(0) @binding(0) var<storage, read_write> c: array<u32>;
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  if (lid == 0u) {
    if (wid.x == 0u) { c[0] = c[0] + 1u; } else { c[wid.x] = wid.x; }
  }
}`;

/** A link that reads `words` vec4<u32> at a region's start with `loads` independent loads a trip. */
function readShader(loads: number): string {
  const accs = Array.from({ length: loads }, (_, u) => `  var a${u} = vec4<u32>();`).join('\n');
  const body = Array.from({ length: loads }, (_, u) => `    a${u} += data[base + i + ${u}u * stride];`).join('\n');
  const total = Array.from({ length: loads }, (_, u) => `a${u}`).join(' + ');
  return /* wgsl */ `
struct Region { base: u32, words: u32, out: u32, pad: u32 }
@group(0) @binding(0) var<storage, read> data: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> sums: array<u32>;
@group(0) @binding(2) var<uniform> region: Region;
var<workgroup> red: array<u32, ${WG}>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) groups: vec3u) {
  let stride = groups.x * ${WG}u;
  let base = region.base;
  let n = region.words;
${accs}
  var i = gid.x;
  while (i + ${loads - 1}u * stride < n) {
${body}
    i += ${loads}u * stride;
  }
  while (i < n) { a0 += data[base + i]; i += stride; }
  let v = ${total};
  red[lid] = v.x + v.y + v.z + v.w;
  workgroupBarrier();
  for (var h = ${WG / 2}u; h > 0u; h >>= 1u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  if (lid == 0u) { sums[region.out + wid.x] = red[0]; }
}
`;
}

interface ChainRow {
  link: string;
  workgroups: number;
  loads?: number;
  bytesPerLink?: number;
  links: number;
  usPerLink: number;
  gbPerS?: number;
  /** Round trips: host wall time and GPU span per round, µs. */
  wallUs?: number;
  gpuUs?: number;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const outIndex = argv.indexOf('--out');
  const outFile = outIndex >= 0 ? argv[outIndex + 1] : undefined;
  const deadlineIndex = argv.indexOf('--deadline');
  if (deadlineIndex >= 0) exitAfter(Number(argv[deadlineIndex + 1]));
  const gpu = await acquireBenchGpu();
  const { device } = gpu;
  const timer = new GpuSpanTimer(device);
  const rows: ChainRow[] = [];
  const time = async (encode: (enc: GPUCommandEncoder) => void) => {
    await timer.time(encode); // warm-up
    const spans: number[] = [];
    for (let s = 0; s < 5; s++) spans.push(await timer.time(encode));
    return median(spans);
  };
  try {
    // Empty links.
    const counter = device.createBuffer({ size: 4 * 4096, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    const empty = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code: EMPTY }), entryPoint: 'main' } });
    const emptyGroup = device.createBindGroup({ layout: empty.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: counter } }] });
    for (const workgroups of [1, 256, 1024]) {
      const links = 200;
      progress(`chain: ${links} empty links of ${workgroups} workgroups`);
      const seconds = await time((enc) => {
        const pass = enc.beginComputePass();
        pass.setPipeline(empty);
        pass.setBindGroup(0, emptyGroup);
        for (let i = 0; i < links; i++) pass.dispatchWorkgroups(workgroups);
        pass.end();
      });
      rows.push({ link: 'empty', workgroups, links, usPerLink: (seconds / links) * 1e6 });
    }
    const check = device.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(counter, 0, check, 0, 4);
    device.queue.submit([enc.finish()]);
    await check.mapAsync(GPUMapMode.READ);
    const count = new Uint32Array(check.getMappedRange().slice(0))[0];
    check.unmap();
    if (count !== 3 * 6 * 200) throw new Error(`the empty chain counted ${count} links, expected ${3 * 6 * 200}`);

    // A step's round trip as the runtime makes it: 171 empty links in 1 or 6 submits, a 256 KB copy to a staging
    // buffer and mapAsync; the host's wall time per round against the GPU's span of the same commands.
    const logits = device.createBuffer({ size: 256 << 10, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
    const staging = device.createBuffer({ size: 256 << 10, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const stamps = device.createQuerySet({ type: 'timestamp', count: 2 });
    const resolved = device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
    const stampsBack = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    for (const submits of [1, 6]) {
      for (const map of [true, false]) {
        const rounds = 200;
        const walls: number[] = [];
        const spans: number[] = [];
        for (let r = 0; r < rounds + 10; r++) {
          const t0 = performance.now();
          const per = Math.ceil(171 / submits);
          for (let s = 0; s < submits; s++) {
            const e = device.createCommandEncoder();
            const first = s === 0;
            const last = s === submits - 1;
            const pass = e.beginComputePass({ timestampWrites: { querySet: stamps, ...(first ? { beginningOfPassWriteIndex: 0 } : {}), ...(last ? { endOfPassWriteIndex: 1 } : {}) } });
            pass.setPipeline(empty);
            pass.setBindGroup(0, emptyGroup);
            for (let i = 0; i < Math.min(per, 171 - s * per); i++) pass.dispatchWorkgroups(256);
            pass.end();
            if (last) {
              e.copyBufferToBuffer(logits, 0, staging, 0, 256 << 10);
              e.resolveQuerySet(stamps, 0, 2, resolved, 0);
              e.copyBufferToBuffer(resolved, 0, stampsBack, 0, 16);
            }
            device.queue.submit([e.finish()]);
          }
          const tSubmitted = performance.now();
          if (map) {
            await staging.mapAsync(GPUMapMode.READ);
            new Float32Array(staging.getMappedRange()).slice(0);
            staging.unmap();
          } else await device.queue.onSubmittedWorkDone();
          const t1 = performance.now();
          await stampsBack.mapAsync(GPUMapMode.READ);
          const [b, en] = new BigUint64Array(stampsBack.getMappedRange().slice(0));
          stampsBack.unmap();
          if (r >= 10) {
            walls.push(t1 - t0);
            spans.push(Number(en - b) / 1e6);
            if (r === 10) progress(`round trip: submit took ${(tSubmitted - t0).toFixed(3)} ms`);
          }
        }
        const wall = median(walls) * 1000;
        const gpuSpan = median(spans) * 1000;
        rows.push({ link: `round trip, 171 empty links in ${submits} submit(s), then ${map ? 'mapAsync of 256 KB' : 'onSubmittedWorkDone'}`, workgroups: 256, links: 171, usPerLink: wall / 171, wallUs: wall, gpuUs: gpuSpan });
      }
    }

    // Read links over regions of their own: 1 GiB of data, each link the next region.
    const bytesAt = argv.indexOf('--bytes');
    const bytes = bytesAt >= 0 ? Number(argv[bytesAt + 1]) : 1 << 30;
    if (!(bytes >= 32 << 20 && bytes % (32 << 20) === 0 && bytes <= 1 << 30)) throw new Error(`--bytes must be a multiple of 32 MiB up to 1 GiB, got ${argv[bytesAt + 1]}`);
    // Random data (constant data could be compressed by the memory system), and each 8 MiB piece's wrapping sum.
    const data = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE, mappedAtCreation: true });
    const PIECE = 8 << 20;
    const pieceSums = new Uint32Array(bytes / PIECE);
    fillRandom(new Uint8Array(data.getMappedRange()), (chunk, offset) => {
      const words = new Uint32Array(chunk.buffer, chunk.byteOffset, chunk.byteLength / 4);
      for (let k = 0; k < words.length; k++) {
        const p = Math.floor((offset + 4 * k) / PIECE);
        pieceSums[p] = (pieceSums[p] + words[k]) >>> 0;
      }
    });
    data.unmap();
    const SUM_WORDS = 1 << 17;
    const sums = device.createBuffer({ size: 4 * SUM_WORDS, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
    const sumsBack = device.createBuffer({ size: 4 * SUM_WORDS, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    for (const [regionBytes, workgroups, loadsList] of [
      [8 << 20, 256, [1, 2, 4, 8]],
      [8 << 20, 1024, [1, 2, 4]],
      [32 << 20, 256, [2, 4, 8]],
      [32 << 20, 1024, [1, 2, 4, 8]],
    ] as [number, number, number[]][]) {
      const regions = Math.floor(bytes / regionBytes);
      const uniforms = Array.from({ length: regions }, (_, r) => {
        const u = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
        device.queue.writeBuffer(u, 0, new Uint32Array([(r * regionBytes) / 16, regionBytes / 16, r * workgroups, 0]));
        return u;
      });
      for (const loads of loadsList) {
        progress(`chain: reads of ${regionBytes >> 20} MiB, ${workgroups} workgroups, ${loads} loads a trip`);
        const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code: readShader(loads) }), entryPoint: 'main' } });
        const groups = uniforms.map((u) =>
          device.createBindGroup({
            layout: pipeline.getBindGroupLayout(0),
            entries: [
              { binding: 0, resource: { buffer: data } },
              { binding: 1, resource: { buffer: sums } },
              { binding: 2, resource: { buffer: u } },
            ],
          }),
        );
        const links = regions;
        const seconds = await time((e) => {
          const pass = e.beginComputePass();
          pass.setPipeline(pipeline);
          for (let i = 0; i < links; i++) {
            pass.setBindGroup(0, groups[i]);
            pass.dispatchWorkgroups(workgroups);
          }
          pass.end();
        });
        // Every link's workgroups summed their region: the partial sums add up to the CPU's sum of it.
        const e = device.createCommandEncoder();
        e.copyBufferToBuffer(sums, 0, sumsBack, 0, 4 * links * workgroups);
        device.queue.submit([e.finish()]);
        await sumsBack.mapAsync(GPUMapMode.READ, 0, 4 * links * workgroups);
        const got = new Uint32Array(sumsBack.getMappedRange(0, 4 * links * workgroups).slice(0));
        sumsBack.unmap();
        for (let r = 0; r < links; r++) {
          let sum = 0;
          for (let w = 0; w < workgroups; w++) sum = (sum + got[r * workgroups + w]) >>> 0;
          let want = 0;
          for (let p = (r * regionBytes) / PIECE; p < ((r + 1) * regionBytes) / PIECE; p++) want = (want + pieceSums[p]) >>> 0;
          if (sum !== want) throw new Error(`read link ${r} (${workgroups} workgroups, ${loads} loads) summed ${sum}, expected ${want}`);
        }
        const usPerLink = (seconds / links) * 1e6;
        rows.push({ link: 'read', workgroups, loads, bytesPerLink: regionBytes, links, usPerLink, gbPerS: regionBytes / (usPerLink * 1e3) });
      }
      for (const u of uniforms) u.destroy();
    }
    data.destroy();
    const report = { date: new Date().toISOString(), adapter: gpu.facts.description, rows };
    const json = JSON.stringify(report, null, 2);
    if (outFile) writeFileSync(outFile, json + '\n');
    for (const r of rows) {
      if (r.wallUs !== undefined) {
        console.log(`${r.link}: wall ${r.wallUs.toFixed(0)} µs a round, GPU span ${r.gpuUs!.toFixed(0)} µs`);
        continue;
      }
      const what = r.link === 'empty' ? `empty, ${r.workgroups} workgroups` : `read ${(r.bytesPerLink! / 2 ** 20).toFixed(0)} MiB, ${r.workgroups} workgroups, ${r.loads} loads a trip`;
      console.log(`${what}: ${r.usPerLink.toFixed(2)} µs a link${r.gbPerS ? `, ${r.gbPerS.toFixed(0)} GB/s` : ''} (${r.links} links)`);
    }
  } finally {
    timer.dispose();
    gpu.release();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
