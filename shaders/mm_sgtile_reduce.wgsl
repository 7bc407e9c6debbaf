// Last pass of a tiled subgroup-matrix product (mm_sgtile.wgsl), split or not: output (t, virtual row) is the
// sum of its SPLIT partial sums (sgtile_layout.wgsl part_index), added in split order, then stored as every
// product stores (activation, accumulation into the residual stream, bounds).
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
