// The RWKV-4 time-mix recurrence (see engine/rwkv4/weights.ts for the math), sequential over each job's tokens.
// One invocation per (channel, job): each channel's state (a, b, p) is independent of the others'. Writes
// r ⊙ wkv, the output matrix's input.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> tm: array<f32>;      // regions of TMAX*C: k, v, sigmoid(r)
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(5) var<storage, read> decay: array<f32>;   // [w = -exp(time_decay), u = time_first] x C
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

const C: u32 = {{C}}u;
const STATE: u32 = {{STATE}}u;
const REG: u32 = {{TMAX}}u * {{C}}u;
/**
 * The reference starts p at -1e30 (no history), the engine's fresh state is all zeros. Both mean "nothing
 * seen" exactly when b = 0 (after any token b >= 1: the larger of the two exponents is 0), so b = 0 reads p
 * as -1e30: a fresh state then evolves into the reference's state, not into an equivalent rescaled one.
 */
const EMPTY_P: f32 = -1e30;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let c = gid.x;
  if (c >= C || gid.y >= batch.J) { return; }
  let job = jobs[gid.y];
  let at = job.x * STATE + layer.att_kv + c;
  var a = state[at];
  var b = state[at + C];
  var p = state[at + 2u * C];
  if (b == 0.0) { p = EMPTY_P; }
  let w = decay[c];
  let u = decay[C + c];
  let end = job.y + job.z;
  for (var t = job.y; t < end; t++) {
    let idx = t * C + c;
    let k = tm[idx];
    let v = tm[REG + idx];
    let r = tm[2u * REG + idx];
    let uk = u + k;
    let q = max(p, uk);
    let e1 = exp(p - q);
    let e2 = exp(uk - q);
    out[idx] = r * (e1 * a + e2 * v) / (e1 * b + e2);
    let pw = p + w;
    let p2 = max(pw, k);
    let d1 = exp(pw - p2);
    let d2 = exp(k - p2);
    a = d1 * a + d2 * v;
    b = d1 * b + d2;
    p = p2;
  }
  state[at] = a;
  state[at + C] = b;
  state[at + 2u * C] = p;
}
