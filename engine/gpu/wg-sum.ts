// Which workgroup sum (a norm's statistics, a head's time-mix sums) a device's kernels include: the tree in
// workgroup memory (shaders/wg_sum.wgsl, every device) or subgroup sums and one pass over their partials
// (shaders/wg_sum_subgroup.wgsl: two barriers instead of log2(WG) + 2). The subgroup form needs the 'subgroups'
// feature, one fixed subgroup size (adapter min = max: 32 on NVIDIA, 8 on lavapipe) formed from consecutive
// invocations (as the split WKV kernels assume), and a workgroup a multiple of it.
// RWKV_WG_SUM=shared|subgroup|auto (default auto: subgroup where the device can) is read once; benchmarks compare.

import type { ShaderConstant } from './shader-source';
import type { GpuContext } from './device';

export type WgSumMode = 'auto' | 'shared' | 'subgroup';

export function wgSumModeFrom(value: string | undefined): WgSumMode {
  if (value === undefined || value === '') return 'auto';
  if (value === 'auto' || value === 'shared' || value === 'subgroup') return value;
  throw new Error(`RWKV_WG_SUM=${value}: give auto, shared or subgroup`);
}

const MODE: WgSumMode = wgSumModeFrom(process.env.RWKV_WG_SUM);

/** The shader part defining wg_sum for workgroups of `wg` invocations, and the constants it needs besides WG. */
export function wgSumPart(gpu: Pick<GpuContext, 'features' | 'subgroupSize'>, wg: number, mode: WgSumMode = MODE): { part: string; constants: Record<string, number> } {
  const sg = gpu.subgroupSize;
  const can = gpu.features.has('subgroups') && sg > 0 && wg >= sg && wg % sg === 0;
  if (mode === 'subgroup' && !can) throw new Error(`RWKV_WG_SUM=subgroup: this device cannot (subgroups ${gpu.features.has('subgroups') ? `of ${sg || 'varying'} lanes` : 'missing'}, workgroup ${wg})`);
  return mode !== 'shared' && can ? { part: 'wg_sum_subgroup', constants: { SG: sg } } : { part: 'wg_sum', constants: {} };
}

/** makeKernel's parts and constants with the part 'wg_sum' replaced by this device's choice for workgroups of constants.WG. */
export function withWgSum(
  gpu: Pick<GpuContext, 'features' | 'subgroupSize'>,
  parts: string[],
  constants: Record<string, ShaderConstant>,
): [string[], Record<string, ShaderConstant>] {
  const { part, constants: extra } = wgSumPart(gpu, Number(constants.WG));
  return [parts.map((p) => (p === 'wg_sum' ? part : p)), { ...constants, ...extra }];
}
