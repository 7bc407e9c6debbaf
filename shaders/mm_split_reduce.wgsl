// Second pass of a split-K product (mm_split.wgsl, which declares SPLIT and `part`), and of every tiled product
// (mm_sgtile.wgsl): output (t, virtual row) is the sum of its SPLIT partial sums (part_index of the layout part),
// added in split order, then stored as the single-pass kernels store it (activation, accumulation).
// One invocation sums VR neighbouring virtual rows (never two segments: segments start at multiples of 64) for RT
// tokens, every partial sum loaded before any is stored. Prefill chunks take 4 × 4 (one output an invocation ran at
// about a quarter of the H200's bandwidth there); batched decode keeps 1 × 1, whose many workgroups measured faster
// at 8–64 tokens (engine/rwkv7/matmul.ts reduceShape, bench/RESULTS.md "Reductions").
const RT: u32 = {{RT}}u;
const VR: u32 = {{VR}}u;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let v0 = (wid.x * 64u + lid) * VR;
  let t0 = wid.y * RT;
  if (v0 >= grp.p1) { return; }
  let s = find_seg(v0);
  let o0 = v0 - s.row0;
  if (o0 >= s.n) { return; }
  let rows = row_count();
  // Tokens past the batch read partial sums that are never stored (in bounds of the scratch or clamped).
  var acc: array<f32, RT * VR>;
  for (var z = 0u; z < SPLIT; z++) {
    for (var dt = 0u; dt < RT; dt++) {
      let p = part_index(z, t0 + dt, v0);
      for (var c = 0u; c < VR; c++) { acc[dt * VR + c] += part[p + c]; }
    }
  }
  // put() and out_rows(): f32 rows over the batch (reduce_store_rows.wgsl), or the next product's f16 blocks over its
  // padded rows (reduce_store_blocks.wgsl).
  let last = out_rows();
  for (var dt = 0u; dt < RT; dt++) {
    let t = t0 + dt;
    if (t >= last) { break; }
    for (var c = 0u; c < VR; c++) {
      if (o0 + c < s.n) { put(s, t, o0 + c, acc[dt * VR + c], rows); }
    }
  }
}
