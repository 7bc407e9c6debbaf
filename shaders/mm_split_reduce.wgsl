// Second pass of a split-K product (mm_split.wgsl, which declares SPLIT and `part`), and of every tiled product
// (mm_sgtile.wgsl): output (t, virtual row) is the sum of its SPLIT partial sums (part_index of the layout part),
// added in split order, then stored as the single-pass kernels store it (activation, accumulation).

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
  for (var z = 0u; z < SPLIT; z++) { acc += part[part_index(z, t, vrow)]; }
  store(s, t, o, acc);
}
