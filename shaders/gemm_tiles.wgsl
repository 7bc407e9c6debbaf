// Tile loading shared by the tiled matrix kernels (mm_gemm, mm_gemm16). Each kernel declares its own
// x tile `xs` (its token count differs); the 64-row weight tile `ws` is the same for both.
var<workgroup> ws: array<array<vec4<f32>, 16>, 32>;

/** Stores 4 consecutive k values of token t (k = 4*kq ..) into the x tile, transposed to [k][token]. */
fn store_x(kq: u32, t: u32, v: vec4<f32>) {
  xs[kq * 4u][t / 4u][t % 4u] = v.x;
  xs[kq * 4u + 1u][t / 4u][t % 4u] = v.y;
  xs[kq * 4u + 2u][t / 4u][t % 4u] = v.z;
  xs[kq * 4u + 3u][t / 4u][t % 4u] = v.w;
}

/** Loads weight rows o0..o0+63, k0..k0+31 of segment s into ws, transposed to [k][row]: 8 halves a lane. */
fn load_weight_tile(s: Seg, o0: u32, k0: u32, lid: u32) {
  let o = lid / 4u;
  let kc = (lid % 4u) * 8u;
  var m = mat2x4<f32>();
  if (o0 + o < s.n) { m = load_w8(w8_at(s, o0 + o, k0 + kc)); }
  for (var q = 0u; q < 4u; q++) {
    ws[kc + q][o / 4u][o % 4u] = m[0][q];
    ws[kc + 4u + q][o / 4u][o % 4u] = m[1][q];
  }
}
