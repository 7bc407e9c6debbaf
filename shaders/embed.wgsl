// Embedding lookup (the table is already layer-normed with ln0 at load time). Binding 1 (W) comes from the
// weight-format prelude.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;

const C: u32 = {{C}}u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let c8 = gid.x;
  let t = gid.y;
  if (c8 * 8u >= C || t >= batch.T) { return; }
  let m = load_w8((ids[t] * C) / 8u + c8);
  y[(t * C) / 4u + 2u * c8] = m[0];
  y[(t * C) / 4u + 2u * c8 + 1u] = m[1];
}
