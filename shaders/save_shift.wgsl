// Stores each job's last (normalized) token as the slot's shift state for the next call.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;

const C: u32 = {{C}}u;
const STATE: u32 = {{STATE}}u;
const FFN: bool = {{FFN}};

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let c = gid.x;
  let j = gid.y;
  if (c >= C || j >= batch.J) { return; }
  let job = jobs[j];
  var off = layer.att_shift;
  if (FFN) { off = layer.ffn_shift; }
  state[job.x * STATE + off + c] = x[(job.y + job.z - 1u) * C + c];
}
