// The end of the RWKV-4/5/6 channel mix: x += sigmoid(R r_x) * (V relu(K k_x)^2). The receptance (already
// through its sigmoid) follows the key activations in `ffk`; the value product is in tm region 0.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> ffk: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;

const C: u32 = {{C}}u;
const RECEPTANCE: u32 = {{TMAX}}u * {{F}}u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let c = gid.x;
  let t = gid.y;
  if (c >= C || t >= batch.T) { return; }
  let idx = t * C + c;
  x[idx] += ffk[RECEPTANCE + idx] * v[idx];
}
