// Matrix-vector product for a few tokens (decode): 8 output rows per workgroup, 32 lanes per row reading
// consecutive 16-byte chunks of the row, up to 4 tokens per pass so each weight is read once per 4 tokens.
var<workgroup> red: array<array<f32, 256>, 4>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let lane = lid % 32u;
  let o = wid.x * 8u + lid / 32u;
  let rows = row_count();
  let t0 = wid.y * 4u;
  var acc = vec4<f32>(0.0);
  if (o < mat.N) {
    for (var k = lane * 8u; k < mat.K; k += 256u) {
      let m = load_w8((o * mat.K + k) / 8u);
      for (var tt = 0u; tt < 4u; tt++) {
        if (t0 + tt < rows) {
          let xi = ((t0 + tt) * mat.K + k) / 4u;
          acc[tt] += dot(m[0], x[xi]) + dot(m[1], x[xi + 1u]);
        }
      }
    }
  }
  for (var tt = 0u; tt < 4u; tt++) { red[tt][lid] = acc[tt]; }
  workgroupBarrier();
  for (var s = 16u; s > 0u; s = s >> 1u) {
    if (lane < s) {
      for (var tt = 0u; tt < 4u; tt++) { red[tt][lid] += red[tt][lid + s]; }
    }
    workgroupBarrier();
  }
  if (lane == 0u && o < mat.N) {
    for (var tt = 0u; tt < 4u; tt++) {
      if (t0 + tt < rows) { store(t0 + tt, o, red[tt][lid]); }
    }
  }
}
