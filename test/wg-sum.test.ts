// Workgroup sums (engine/gpu/wg-sum.ts): which form a device gets, and on this device both forms give every lane the
// same bits, close to the exact sum (the subgroup form relies on subgroups of consecutive invocations).

import { strict as assert } from 'assert';
import { acquireGpu, releaseGpu, type GpuContext } from '../engine/gpu/device';
import { shaderSource } from '../engine/gpu/shader-source';
import { wgSumModeFrom, wgSumPart, withWgSum } from '../engine/gpu/wg-sum';

describe('workgroup sums', function () {
  this.timeout(120_000);

  it('take subgroups where the device has one fixed size that divides the workgroup, else the tree', () => {
    const sub = { features: new Set(['subgroups']), subgroupSize: 32 };
    assert.deepEqual(wgSumPart(sub, 256, 'auto'), { part: 'wg_sum_subgroup', constants: { SG: 32 } });
    assert.deepEqual(wgSumPart(sub, 16, 'auto'), { part: 'wg_sum', constants: {} });
    assert.deepEqual(wgSumPart({ ...sub, subgroupSize: 0 }, 256, 'auto'), { part: 'wg_sum', constants: {} });
    assert.deepEqual(wgSumPart({ ...sub, features: new Set<string>() }, 256, 'auto'), { part: 'wg_sum', constants: {} });
    assert.deepEqual(wgSumPart(sub, 256, 'shared'), { part: 'wg_sum', constants: {} });
    assert.throws(() => wgSumPart({ ...sub, subgroupSize: 0 }, 256, 'subgroup'), /RWKV_WG_SUM=subgroup: this device cannot/);
    assert.equal(wgSumModeFrom(undefined), 'auto');
    assert.throws(() => wgSumModeFrom('tree'), /RWKV_WG_SUM=tree: give auto, shared or subgroup/);
    const [parts, constants] = withWgSum(sub, ['wg_sum', 'ln_shift'], { WG: 256, C: 8 });
    assert.deepEqual(parts, ['wg_sum_subgroup', 'ln_shift']);
    assert.deepEqual(constants, { WG: 256, C: 8, SG: 32 });
  });

  describe('on this device', () => {
    let gpu: GpuContext;
    before(async () => {
      gpu = await acquireGpu();
    });
    after(() => gpu && releaseGpu(gpu));

    const body = `@group(0) @binding(0) var<storage, read> v: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(WG) fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3u) {
  let base = wid.x * WG;
  let a = wg_sum(v[base + lid], lid);
  // A second sum right after the first: the partials' reuse must wait for every lane's read.
  let b = wg_sum(v[base + lid] * 2.0 + 1.0, lid);
  out[2u * (base + lid)] = a;
  out[2u * (base + lid) + 1u] = b;
}`;

    for (const mode of ['shared', 'subgroup'] as const) {
      it(`${mode}: every lane gets the same bits, within rounding of the exact sums`, async function () {
        const WG = 256;
        const groups = 6;
        let part: string;
        let extra: Record<string, number>;
        try {
          ({ part, constants: extra } = wgSumPart(gpu, WG, mode));
        } catch (e) {
          console.log(`      (skipped: ${(e as Error).message})`);
          return this.skip();
        }
        // The part as the engine builds it (directives hoisted, constants filled), then this test's entry point.
        const code = shaderSource([part], { WG, ...extra }) + '\n' + body;
        const dev = gpu.device;
        const pipeline = dev.createComputePipeline({ layout: 'auto', compute: { module: dev.createShaderModule({ code }), entryPoint: 'main' } });
        {
          const values = Float32Array.from({ length: WG * groups }, (_, i) => Math.sin(i * 12.9898) * 100);
          const vb = dev.createBuffer({ size: values.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
          dev.queue.writeBuffer(vb, 0, values);
          const ob = dev.createBuffer({ size: values.byteLength * 2, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
          const rb = dev.createBuffer({ size: values.byteLength * 2, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
          const enc = dev.createCommandEncoder();
          const pass = enc.beginComputePass();
          pass.setPipeline(pipeline);
          pass.setBindGroup(0, dev.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: vb } }, { binding: 1, resource: { buffer: ob } }] }));
          pass.dispatchWorkgroups(groups);
          pass.end();
          enc.copyBufferToBuffer(ob, 0, rb, 0, values.byteLength * 2);
          dev.queue.submit([enc.finish()]);
          await rb.mapAsync(GPUMapMode.READ);
          const got = new Float32Array(rb.getMappedRange().slice(0));
          rb.unmap();
          [vb, ob, rb].forEach((b) => b.destroy());
          const bits = new Uint32Array(got.buffer);
          for (let g = 0; g < groups; g++) {
            let exactA = 0;
            let exactB = 0;
            let mag = 0;
            for (let i = 0; i < WG; i++) {
              const x = values[g * WG + i];
              exactA += x;
              exactB += Math.fround(Math.fround(x * 2) + 1);
              mag += Math.abs(x) * 2 + 1;
            }
            for (let i = 0; i < WG; i++) {
              const o = 2 * (g * WG + i);
              assert.equal(bits[o], bits[2 * g * WG], `group ${g} lane ${i}: first sum differs between lanes`);
              assert.equal(bits[o + 1], bits[2 * g * WG + 1], `group ${g} lane ${i}: second sum differs between lanes`);
            }
            assert.ok(Math.abs(got[2 * g * WG] - exactA) <= 1e-5 * mag, `group ${g}: ${got[2 * g * WG]} vs ${exactA}`);
            assert.ok(Math.abs(got[2 * g * WG + 1] - exactB) <= 1e-5 * mag, `group ${g}: ${got[2 * g * WG + 1]} vs ${exactB}`);
          }
        }
      });
    }
  });
});
