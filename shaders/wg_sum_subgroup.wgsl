// Sum of one value per invocation over a workgroup of WG invocations, the sum wg_sum.wgsl takes (in another order),
// in two steps: subgroupAdd inside each subgroup of SG consecutive invocations, then every invocation adds the
// WG / SG partial sums in subgroup order, so all of them get the same bits. Two barriers where wg_sum.wgsl's tree in
// workgroup memory takes log2(WG) + 2: at batch 1 a layer norm and a head's time mix are chains of such sums, one
// workgroup each (engine/gpu/wg-sum.ts chooses; only devices with one subgroup size, formed from consecutive invocations).
enable subgroups;
const WG: u32 = {{WG}}u;
const SG: u32 = {{SG}}u;
var<workgroup> red: array<f32, WG / SG>;

fn wg_sum(v: f32, lid: u32) -> f32 {
  let s = subgroupAdd(v);
  if (lid % SG == 0u) { red[lid / SG] = s; }
  workgroupBarrier();
  var r = 0.0;
  for (var i = 0u; i < WG / SG; i++) { r += red[i]; }
  workgroupBarrier();
  return r;
}
