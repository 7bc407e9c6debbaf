// First pass of a tiled subgroup-matrix product (mm_sgtile.wgsl): every segment's f32 inputs x_s become f16
// blocks of 16×16 (sgtile_layout.wgsl), tokens past the batch as zeros. One invocation converts 8 inputs of one
// token (16 bytes written, half a block row).
@group(0) @binding(6) var<storage, read_write> xt: array<vec4<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  var u = gid.x + gid.y * nwg.x * 256u;
  let rows = row_count();
  let prows = padded_rows();
  var base = 0u;
  for (var i = 0u; i < grp.count; i++) {
    let s = grp.segs[i];
    let units = prows * (s.k / 8u);
    if (u < units) {
      let t = u / (s.k / 8u);
      let k = (u % (s.k / 8u)) * 8u;
      var a = vec4<f32>(0.0);
      var b = vec4<f32>(0.0);
      if (t < rows) {
        let xi = s.x_off + (t * s.k + k) / 4u;
        a = x[xi];
        b = x[xi + 1u];
      }
      let h = base + block_half(t, k, s.k);
      xt[h / 8u] = vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy), pack2x16float(b.zw));
      return;
    }
    u -= units;
    base += prows * s.k;
  }
}
