// Tiled matrix product with 16-token tiles: 16 tokens x 64 output rows per workgroup, K in steps of 32.
// For mid-size batches the 64-token tile of mm_gemm makes too few workgroups to fill a large GPU (32 per
// 64 tokens of a 2048-wide matrix); this one makes four times as many and reads each weight tile once per
// 16 tokens.
var<workgroup> xs: array<array<vec4<f32>, 4>, 32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let rows = row_count();
  let s = find_seg(wid.x * 64u);
  let o0 = wid.x * 64u - s.row0;
  let t0 = wid.y * 16u;
  let tr = lid / 16u;
  let tc = lid % 16u;
  var acc = vec4<f32>(0.0);
  for (var k0 = 0u; k0 < s.k; k0 += 32u) {
    if (lid < 128u) {
      let t = lid / 8u;
      let kq = lid % 8u;
      var v = vec4<f32>(0.0);
      if (t0 + t < rows) { v = x[s.x_off + ((t0 + t) * s.k + k0) / 4u + kq]; }
      store_x(kq, t, v);
    }
    load_weight_tile(s, o0, k0, lid);
    workgroupBarrier();
    for (var k = 0u; k < 32u; k++) {
      acc += xs[k][tr / 4u][tr % 4u] * ws[k][tc];
    }
    workgroupBarrier();
  }
  let t = t0 + tr;
  if (t < rows) {
    for (var jj = 0u; jj < 4u; jj++) {
      let o = o0 + tc * 4u + jj;
      if (o < s.n) { store(s, t, o, acc[jj]); }
    }
  }
}
