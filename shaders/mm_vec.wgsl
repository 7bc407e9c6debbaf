// Matrix-vector product for a few tokens (decode): 8 output rows per workgroup, 32 lanes per row reading
// consecutive 16-byte chunks of the row, TB tokens per pass so each weight is read once per TB tokens.
// The 32 lanes of a row are summed with subgroupAdd where subgroups are 32 wide, else in shared memory.
const TB: u32 = {{TB}}u;
const TQ: u32 = TB / 4u;
var<workgroup> red: array<array<f32, 256>, TB>;

fn lane_sum(v: vec4<f32>, lid: u32, lane: u32, q: u32) -> vec4<f32> {
  if (SUBGROUP32) {
    return row_subgroup_sum(v);
  }
  for (var tt = 0u; tt < 4u; tt++) { red[q * 4u + tt][lid] = v[tt]; }
  workgroupBarrier();
  for (var s = 16u; s > 0u; s = s >> 1u) {
    if (lane < s) {
      for (var tt = 0u; tt < 4u; tt++) { red[q * 4u + tt][lid] += red[q * 4u + tt][lid + s]; }
    }
    workgroupBarrier();
  }
  return vec4<f32>(red[q * 4u][lid], red[q * 4u + 1u][lid], red[q * 4u + 2u][lid], red[q * 4u + 3u][lid]);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let lane = lid % 32u;
  let s = find_seg(wid.x * 8u);
  let o = wid.x * 8u + lid / 32u - s.row0;
  let rows = row_count();
  let t0 = wid.y * TB;
  var acc: array<vec4<f32>, TQ>;
  if (o < s.n) {
    let wrow = s.w_off + (o * s.k) / 8u;
    var k = lane * 8u;
    // Two weight loads per trip keep more memory requests in flight per lane.
    for (; k + 256u < s.k; k += 512u) {
      let m = load_w8(wrow + k / 8u);
      let m2 = load_w8(wrow + (k + 256u) / 8u);
      for (var tt = 0u; tt < TB; tt++) {
        if (t0 + tt < rows) {
          let xi = s.x_off + ((t0 + tt) * s.k + k) / 4u;
          acc[tt / 4u][tt % 4u] += dot(m[0], x[xi]) + dot(m[1], x[xi + 1u]) + dot(m2[0], x[xi + 64u]) + dot(m2[1], x[xi + 65u]);
        }
      }
    }
    if (k < s.k) {
      let m = load_w8(wrow + k / 8u);
      for (var tt = 0u; tt < TB; tt++) {
        if (t0 + tt < rows) {
          let xi = s.x_off + ((t0 + tt) * s.k + k) / 4u;
          acc[tt / 4u][tt % 4u] += dot(m[0], x[xi]) + dot(m[1], x[xi + 1u]);
        }
      }
    }
  }
  for (var q = 0u; q < TQ; q++) {
    let total = lane_sum(acc[q], lid, lane, q);
    if (lane == 0u && o < s.n) {
      for (var tt = 0u; tt < 4u; tt++) {
        let t = t0 + q * 4u + tt;
        if (t < rows) { store(s, t, o, total[tt]); }
      }
    }
  }
}
