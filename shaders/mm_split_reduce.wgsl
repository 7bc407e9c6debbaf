// Second pass of a split-K product (mm_split.wgsl): output (t, virtual row) is the sum of its SPLIT partial
// sums, added in split order, then stored as the single-pass kernels store it (activation, accumulation).
const SPLIT: u32 = {{SPLIT}}u;
@group(0) @binding(5) var<storage, read_write> part: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let vrow = wid.x * 64u + lid;
  let t = wid.y;
  let rows = row_count();
  if (vrow >= grp.p1 || t >= rows) { return; }
  let s = find_seg(vrow);
  let o = vrow - s.row0;
  if (o >= s.n) { return; }
  var acc = 0.0;
  for (var z = 0u; z < SPLIT; z++) { acc += part[(z * rows + t) * grp.p1 + vrow]; }
  store(s, t, o, acc);
}
