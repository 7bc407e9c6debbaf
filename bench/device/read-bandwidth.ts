/// <reference types="@webgpu/types" />
// How fast a plain WGSL compute kernel can read device memory: each invocation walks a large
// array<vec4<u32>> with a grid-stride loop, sums what it reads, and each workgroup writes one
// partial sum. Compared with the copy bandwidth this shows what share of the memory system a
// WGSL kernel (through Dawn → Vulkan → the driver) can use, and which grid size gets there.
// Bytes are counted as read only (the partial sums written are negligible).
//
// The sum is checked against the CPU's (wrapping u32 addition), so a kernel that skipped data
// cannot report a bandwidth.

import { progress } from './progress';
import { fillRandom } from './random-fill';
import { GpuSpanTimer, TimingMethod, calibrateRepetitions, median } from './gpu-span-timer';

export interface ReadProbeOptions {
  /** Bytes to read per pass; multiple of 16. Default: 1 GiB or the binding-size limit if smaller. */
  bytes?: number;
  /** Invocations per workgroup (power of two). Default 256. */
  workgroupSize?: number;
  /** Grid sizes to try (workgroups in x). */
  workgroupCounts?: number[];
  /** vec4 loads issued per loop iteration per invocation (independent loads in flight). */
  unrolls?: number[];
  /** Timed spans per variant (median taken). Default 3. */
  spans?: number;
  /** Target length of one timed span in seconds. Default 0.03. */
  targetSpanSeconds?: number;
}

export interface ReadProbeRow {
  workgroups: number;
  unroll: number;
  /** GB/s (1e9 bytes), bytes read. */
  gbPerS: number;
  secondsPerPass: number;
  passesPerSpan: number;
}

export interface ReadProbeResult {
  counted: 'read';
  method: TimingMethod;
  bytes: number;
  workgroupSize: number;
  rows: ReadProbeRow[];
  best: ReadProbeRow;
}

const DEFAULT_BYTES = 1 << 30;
// Multiples of the H200's 132 multiprocessors, up to the 1-D dispatch limit's neighbourhood.
const DEFAULT_WORKGROUP_COUNTS = [132, 264, 528, 1056, 2112, 4224, 8448, 16896];
const DEFAULT_UNROLLS = [1, 4];

/** WGSL for one variant: `unroll` independent vec4 loads per loop trip, then a tail loop. */
export function readProbeShader(workgroupSize: number, unroll: number): string {
  const loads = Array.from({ length: unroll }, (_, k) => `    acc${k} += data[i + ${k}u * stride];`).join('\n');
  const accs = Array.from({ length: unroll }, (_, k) => `  var acc${k} = vec4<u32>();`).join('\n');
  const total = Array.from({ length: unroll }, (_, k) => `acc${k}`).join(' + ');
  return /* wgsl */ `
@group(0) @binding(0) var<storage, read> data: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> partials: array<u32>;
var<workgroup> scratch: array<u32, ${workgroupSize}>;

@compute @workgroup_size(${workgroupSize})
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let n = arrayLength(&data);
  let stride = groups.x * ${workgroupSize}u;
${accs}
  var i = gid.x;
  while (i + ${unroll - 1}u * stride < n) {
${loads}
    i += ${unroll}u * stride;
  }
  while (i < n) {
    acc0 += data[i];
    i += stride;
  }
  let v = ${total};
  scratch[lid] = v.x + v.y + v.z + v.w;
  workgroupBarrier();
  for (var half = ${workgroupSize / 2}u; half > 0u; half >>= 1u) {
    if (lid < half) {
      scratch[lid] += scratch[lid + half];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    partials[wid.x] = scratch[0];
  }
}
`;
}

export async function measureWgslReadBandwidth(device: GPUDevice, options: ReadProbeOptions = {}): Promise<ReadProbeResult> {
  const limit = Math.min(device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize);
  const bytes = options.bytes ?? Math.min(DEFAULT_BYTES, limit - (limit % 16));
  const workgroupSize = options.workgroupSize ?? 256;
  const workgroupCounts = options.workgroupCounts ?? DEFAULT_WORKGROUP_COUNTS;
  const unrolls = options.unrolls ?? DEFAULT_UNROLLS;
  const spans = options.spans ?? 3;
  const targetSpanSeconds = options.targetSpanSeconds ?? 0.03;
  if (!Number.isSafeInteger(bytes) || bytes <= 0 || bytes % 16 !== 0) {
    throw new Error(`read size must be a positive multiple of 16 bytes, got ${bytes}`);
  }
  if (bytes > limit) {
    throw new Error(`read size ${bytes} exceeds the device's storage binding limit ${limit}`);
  }
  if (!isPowerOfTwo(workgroupSize) || workgroupSize > device.limits.maxComputeInvocationsPerWorkgroup) {
    throw new Error(
      `workgroup size must be a power of two up to ${device.limits.maxComputeInvocationsPerWorkgroup}, got ${workgroupSize}`,
    );
  }
  for (const count of workgroupCounts) {
    if (!Number.isInteger(count) || count < 1 || count > device.limits.maxComputeWorkgroupsPerDimension) {
      throw new Error(`workgroup count must be 1..${device.limits.maxComputeWorkgroupsPerDimension}, got ${count}`);
    }
  }
  for (const unroll of unrolls) {
    if (!Number.isInteger(unroll) || unroll < 1 || unroll > 16) throw new Error(`unroll must be 1..16, got ${unroll}`);
  }

  // Random data (never zeros) and its wrapping u32 sum, the answer every variant must give.
  progress(`read: filling ${bytes} bytes with random data`);
  // The sum is taken over the host chunks, never the mapped range: that can be uncached
  // write-combined memory, where reading is orders of magnitude slower (see fillRandom).
  const data = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE, mappedAtCreation: true });
  let expectedSum = 0;
  fillRandom(new Uint8Array(data.getMappedRange()), (chunk) => {
    const words = new Uint32Array(chunk.buffer, chunk.byteOffset, chunk.byteLength / 4);
    for (let k = 0; k < words.length; k++) expectedSum = (expectedSum + words[k]) >>> 0;
  });
  data.unmap();

  const maxGroups = Math.max(...workgroupCounts);
  const partials = device.createBuffer({ size: 4 * maxGroups, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  const readback = device.createBuffer({ size: 4 * maxGroups, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const timer = new GpuSpanTimer(device);
  const rows: ReadProbeRow[] = [];
  try {
    for (const unroll of unrolls) {
      progress(`read: building the unroll ${unroll} pipeline`);
      device.pushErrorScope('validation');
      const module = device.createShaderModule({ code: readProbeShader(workgroupSize, unroll) });
      const pipeline = await device.createComputePipelineAsync({ layout: 'auto', compute: { module, entryPoint: 'main' } });
      const error = await device.popErrorScope();
      if (error) throw new Error(`read probe shader (unroll ${unroll}) failed to build: ${error.message}`);
      const bindGroup = device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: data } },
          { binding: 1, resource: { buffer: partials } },
        ],
      });
      for (const workgroups of workgroupCounts) {
        const encodePasses = (passes: number) => (encoder: GPUCommandEncoder) => {
          const pass = encoder.beginComputePass();
          pass.setPipeline(pipeline);
          pass.setBindGroup(0, bindGroup);
          for (let p = 0; p < passes; p++) pass.dispatchWorkgroups(workgroups);
          pass.end();
        };
        progress(`read: ${workgroups} workgroups, unroll ${unroll}`);
        // Poison the partial sums, run once, check: every workgroup wrote, nothing was skipped.
        device.queue.writeBuffer(partials, 0, new Uint32Array(maxGroups).fill(0xdeadbeef));
        await timer.time(encodePasses(1));
        const gotSum = await sumPartials(device, partials, readback, workgroups);
        if (gotSum !== expectedSum) {
          throw new Error(`read probe (${workgroups} workgroups, unroll ${unroll}) summed ${gotSum}, expected ${expectedSum}`);
        }
        const passesPerSpan = await calibrateRepetitions(timer, encodePasses, targetSpanSeconds);
        const perPass: number[] = [];
        for (let s = 0; s < spans; s++) perPass.push((await timer.time(encodePasses(passesPerSpan))) / passesPerSpan);
        const secondsPerPass = median(perPass);
        rows.push({ workgroups, unroll, gbPerS: bytes / secondsPerPass / 1e9, secondsPerPass, passesPerSpan });
      }
    }
  } finally {
    timer.dispose();
    data.destroy();
    partials.destroy();
    readback.destroy();
  }
  const best = rows.reduce((a, b) => (b.gbPerS > a.gbPerS ? b : a));
  return { counted: 'read', method: timer.method, bytes, workgroupSize, rows, best };
}

async function sumPartials(device: GPUDevice, partials: GPUBuffer, readback: GPUBuffer, count: number): Promise<number> {
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(partials, 0, readback, 0, 4 * count);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ, 0, 4 * count);
  const values = new Uint32Array(readback.getMappedRange(0, 4 * count).slice(0));
  readback.unmap();
  let sum = 0;
  for (const value of values) sum = (sum + value) >>> 0;
  return sum;
}

function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;
}

/** Bytes the benchmarks probe with: 1 GiB, or the most the device binds and allocates, in whole 16-byte units. */
export function probeBytesFor(device: GPUDevice): number {
  return Math.min(DEFAULT_BYTES, device.limits.maxStorageBufferBindingSize, device.limits.maxBufferSize) & ~15;
}

/**
 * The read probe the engine and precision sections put a step's weight reads against: the best over grid sizes and
 * unrolls (one variant alone under-read by half on the H200, run 1), over `bytes` (probeBytesFor).
 */
export function benchReadProbe(device: GPUDevice, bytes = probeBytesFor(device)): Promise<ReadProbeResult> {
  return measureWgslReadBandwidth(device, { bytes, workgroupCounts: [2112, 8448, 16896], unrolls: [4, 8] });
}
