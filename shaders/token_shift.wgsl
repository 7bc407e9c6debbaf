// Token shift: mixes each token with the previous token of the same slot. The previous token of a slot's
// first token in this batch comes from the slot's saved state. Writes M mixed copies, copy m at m*TMAX rows.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> tok: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> state: array<f32>;
@group(0) @binding(5) var<storage, read> mixw: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

const C: u32 = {{C}}u;
const M: u32 = {{M}}u;
const TMAX: u32 = {{TMAX}}u;
const STATE: u32 = {{STATE}}u;
const FFN: bool = {{FFN}};

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let c = gid.x;
  let t = gid.y;
  if (c >= C || t >= batch.T) { return; }
  let info = tok[t];
  let slot = info & 0x7fffffffu;
  let xv = x[t * C + c];
  var prev: f32;
  if ((info >> 31u) != 0u) {
    var off = layer.att_shift;
    if (FFN) { off = layer.ffn_shift; }
    prev = state[slot * STATE + off + c];
  } else {
    prev = x[(t - 1u) * C + c];
  }
  let d = prev - xv;
  for (var m = 0u; m < M; m++) {
    y[(m * TMAX + t) * C + c] = xv + d * mixw[m * C + c];
  }
}
