// The device's basic facts in one run: adapter, features, limits, copy bandwidth and the read
// bandwidth a plain WGSL kernel reaches. Engine-independent. Prints the full JSON, then a short
// summary last (the device tool returns the end of the output).
//
//   node dist/bench/device/device-facts.js [--bytes N] [--out FILE] [--deadline SECONDS]
// BENCH_PROGRESS=1 reports each stage on stderr; --deadline ends a hung run naming its stage.

import { writeFileSync } from 'node:fs';
import { measureCopyBandwidth, parseBytesArgument } from '../copy-bandwidth';
import { acquireBenchGpu } from './acquire-gpu';
import { exitAfter, progress } from './progress';
import { measureWgslReadBandwidth } from './read-bandwidth';

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const bytes = parseBytesArgument(argv);
  const outIndex = argv.indexOf('--out');
  const outFile = outIndex >= 0 ? argv[outIndex + 1] : undefined;
  if (outIndex >= 0 && !outFile) throw new Error('--out needs a file path');
  const deadlineIndex = argv.indexOf('--deadline');
  if (deadlineIndex >= 0) exitAfter(Number(argv[deadlineIndex + 1]));

  progress('acquiring the WebGPU device');

  const gpu = await acquireBenchGpu();
  try {
    // Printed first so a failure in a measurement still leaves the adapter facts in the log.
    console.error(`adapter facts: ${JSON.stringify(gpu.facts)}`);
    const copy = await measureCopyBandwidth(gpu.device, bytes);
    console.error(`copy: ${copy.gbPerS.toFixed(1)} GB/s read+write (${copy.method}; wall-clock ${copy.wallClockGbPerS.toFixed(1)})`);
    const read = await measureWgslReadBandwidth(gpu.device, { bytes });
    const report = { date: new Date().toISOString(), node: process.version, adapter: gpu.facts, copy, read };
    const json = JSON.stringify(report, null, 2);
    console.log(json);
    if (outFile) writeFileSync(outFile, json + '\n');

    const f = gpu.facts;
    const lines = [
      `adapter: ${f.vendor} / ${f.architecture} / ${f.device} / ${f.description}`,
      `features: ${f.deviceFeatures.join(', ')}  (adapter has shader-f16: ${f.adapterFeatures.includes('shader-f16')})`,
      `maxStorageBufferBindingSize ${f.limits.maxStorageBufferBindingSize}, maxBufferSize ${f.limits.maxBufferSize}, ` +
        `workgroup storage ${f.limits.maxComputeWorkgroupStorageSize} B (adapter ${f.adapterLimits.maxComputeWorkgroupStorageSize}), ` +
        `subgroup size ${f.subgroupMinSize}..${f.subgroupMaxSize}`,
      `copy ${(copy.bytesPerCopy / 2 ** 20).toFixed(0)} MiB: ${copy.gbPerS.toFixed(1)} GB/s read+write (${copy.method}; wall-clock ${copy.wallClockGbPerS.toFixed(1)})`,
      `WGSL read ${(read.bytes / 2 ** 20).toFixed(0)} MiB, workgroup ${read.workgroupSize} (${read.method}):`,
      '  workgroups unroll   GB/s',
      ...read.rows.map((r) => `  ${String(r.workgroups).padStart(10)} ${String(r.unroll).padStart(6)} ${r.gbPerS.toFixed(1).padStart(7)}`),
      `best WGSL read: ${read.best.gbPerS.toFixed(1)} GB/s read (${read.best.workgroups} workgroups, unroll ${read.best.unroll}); ` +
        `copyBufferToBuffer: ${copy.gbPerS.toFixed(1)} GB/s read+write`,
    ];
    console.log(lines.join('\n'));
  } finally {
    gpu.release();
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exitCode = 1;
});
