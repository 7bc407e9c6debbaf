// Sum of one value per invocation over a workgroup of WG invocations (a power of two), as a tree in shared
// memory. The layer norms sum over 256 lanes, the time-mix kernels over the N lanes of one head (the fused decode
// kernel over its N × L). Devices with one subgroup size take wg_sum_subgroup.wgsl instead (engine/gpu/wg-sum.ts).
const WG: u32 = {{WG}}u;
var<workgroup> red: array<f32, WG>;

fn wg_sum(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
