// Matrix-vector product for a few tokens (decode): 8 output rows per workgroup, 32 lanes per row reading
// consecutive 16-byte chunks of the row, up to 4 tokens per pass so each weight is read once per 4 tokens.
// The 32 lanes of a row are summed with subgroupAdd where subgroups are 32 wide, else in shared memory.
var<workgroup> red: array<array<f32, 256>, 4>;

fn lane_sum(v: vec4<f32>, lid: u32, lane: u32) -> vec4<f32> {
  if (SUBGROUP32) {
    return row_subgroup_sum(v);
  }
  for (var tt = 0u; tt < 4u; tt++) { red[tt][lid] = v[tt]; }
  workgroupBarrier();
  for (var s = 16u; s > 0u; s = s >> 1u) {
    if (lane < s) {
      for (var tt = 0u; tt < 4u; tt++) { red[tt][lid] += red[tt][lid + s]; }
    }
    workgroupBarrier();
  }
  return vec4<f32>(red[0][lid], red[1][lid], red[2][lid], red[3][lid]);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let lane = lid % 32u;
  let s = find_seg(wid.x * 8u);
  let o = wid.x * 8u + lid / 32u - s.row0;
  let rows = row_count();
  let t0 = wid.y * 4u;
  var acc = vec4<f32>(0.0);
  if (o < s.n) {
    for (var k = lane * 8u; k < s.k; k += 256u) {
      let m = load_w8(s.w_off + (o * s.k + k) / 8u);
      for (var tt = 0u; tt < 4u; tt++) {
        if (t0 + tt < rows) {
          let xi = s.x_off + ((t0 + tt) * s.k + k) / 4u;
          acc[tt] += dot(m[0], x[xi]) + dot(m[1], x[xi + 1u]);
        }
      }
    }
  }
  let total = lane_sum(acc, lid, lane);
  if (lane == 0u && o < s.n) {
    for (var tt = 0u; tt < 4u; tt++) {
      if (t0 + tt < rows) { store(s, t0 + tt, o, total[tt]); }
    }
  }
}
