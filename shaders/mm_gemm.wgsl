// Tiled matrix product for many tokens: 64 tokens x 64 output rows per workgroup, K in steps of 32.
// Each weight tile is read once per 64 tokens, so prefill cost is dominated by arithmetic, not bandwidth.
// K range and output: mm_whole.wgsl or mm_split.wgsl (as mm_sgmat.wgsl).
var<workgroup> xs: array<array<vec4<f32>, 16>, 32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let rows = row_count();
  let s = find_seg(wid.x * 64u);
  let o0 = wid.x * 64u - s.row0;
  let t0 = wid.y * 64u;
  let tr = lid / 16u;
  let tc = lid % 16u;
  var acc: array<vec4<f32>, 4>;
  let span = k_span(s.k, wid.z, 32u);
  for (var k0 = span.x; k0 < span.y; k0 += 32u) {
    for (var r = 0u; r < 2u; r++) {
      let e = lid + r * 256u;
      let t = e / 8u;
      let kq = e % 8u;
      var v = vec4<f32>(0.0);
      if (t0 + t < rows) { v = x[s.x_off + ((t0 + t) * s.k + k0) / 4u + kq]; }
      store_x(kq, t, v);
    }
    load_weight_tile(s, o0, k0, lid);
    workgroupBarrier();
    for (var k = 0u; k < 32u; k++) {
      let a = xs[k][tr];
      let b = ws[k][tc];
      acc[0] += a.x * b;
      acc[1] += a.y * b;
      acc[2] += a.z * b;
      acc[3] += a.w * b;
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let t = t0 + tr * 4u + i;
    if (t >= rows) { continue; }
    for (var jj = 0u; jj < 4u; jj++) {
      let o = o0 + tc * 4u + jj;
      if (o < s.n) { emit(s, t, o, acc[i][jj], wid.z); }
    }
  }
}
