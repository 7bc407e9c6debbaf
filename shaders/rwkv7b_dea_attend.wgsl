// RWKV-7b's DEA attention, second half: token t (at position p of its slot's cache, its own row written by
// rwkv7b_dea_rows.wgsl) attends over the cached rows 0..p, x[t] += softmax_j(64·tanh(Q·K_j / 1024)) · V_j.
// One workgroup per token, or with SPLIT, per token and range of rows (workgroup_id.y of num_workgroups.y: a
// decode step of a few tokens then fills the GPU, each workgroup's share of the rows bounded); the rows are taken
// 256 at a time with a running max and sum (online softmax), so the workgroup memory and each lane's registers
// stay bounded however long the context. Each lane scores one row of a block, then sums the block's weighted V
// rows into the channels it owns (C / 256 of them). Without SPLIT the result goes to x; with it, each range's
// running max, sum and unnormalized sum of V go to `parts` for rwkv7b_dea_combine.wgsl.
// The last token of each segment also saves its raw q, k̃, ṽ as the slot's shift state for the next call.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;   // slot, first token, tokens, rows before
@group(0) @binding(3) var<storage, read> mix: array<f32>;          // Q [TMAX, 256], raw q, k̃, ṽ [TMAX, 512 + C]
@group(0) @binding(4) var<storage, read> rows: array<f32>;         // this layer's cache [slots, CAP, 256 + C]
@group(0) @binding(5) var<storage, read_write> x: array<f32>;      // [T, C]
@group(0) @binding(6) var<storage, read_write> state: array<f32>;
@group(0) @binding(7) var<storage, read_write> parts: array<f32>;   // SPLIT: per token and range, max, sum, V sum [C]

const C: u32 = {{C}}u;
const QK: u32 = 256u;
const TMAX: u32 = {{TMAX}}u;
const STATE: u32 = {{STATE}}u;
const CAP: u32 = {{CAP}}u;
const RW: u32 = QK + C;
const RAW: u32 = 2u * QK + C;
const WG: u32 = 256u;
const CPL: u32 = (C + WG - 1u) / WG;
const SPLIT: bool = {{SPLIT}};
/** The reference's soft cap 64·tanh(s / 1024); tanh is ±1 in f32 long before |s / 1024| = 10. */
const CAP_MUL: f32 = 64.0;
const CAP_DIV: f32 = 1024.0;

var<workgroup> q: array<f32, QK>;
var<workgroup> p: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nwg: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let t = wid.x;
  var job = jobs[0];
  for (var j = 1u; j < batch.J; j++) {
    if (t >= jobs[j].y) { job = jobs[j]; }
  }
  let rows_held = job.w + (t - job.y) + 1u;
  // This workgroup's rows [first_row, n): all of them, or its share of them.
  let share = (rows_held + nwg.y - 1u) / nwg.y;
  let first_row = min(rows_held, wid.y * share);
  let n = min(rows_held, first_row + share);
  let slotRows = job.x * CAP * RW;
  for (var i = lid; i < QK; i += WG) { q[i] = mix[t * QK + i]; }
  workgroupBarrier();
  var acc: array<f32, CPL>;
  for (var m = 0u; m < CPL; m++) { acc[m] = 0.0; }
  var most = -3.0e38;
  var sum = 0.0;
  for (var j0 = first_row; j0 < n; j0 += WG) {
    let j = j0 + lid;
    var s = -3.0e38;
    if (j < n) {
      let at = slotRows + j * RW;
      var d = 0.0;
      for (var i = 0u; i < QK; i++) { d += q[i] * rows[at + i]; }
      s = CAP_MUL * tanh(clamp(d / CAP_DIV, -10.0, 10.0));
    }
    p[lid] = s;
    workgroupBarrier();
    let count = min(WG, n - j0);
    var blockMost = most;
    for (var b = 0u; b < count; b++) { blockMost = max(blockMost, p[b]); }
    let scale = exp(most - blockMost);
    sum *= scale;
    for (var m = 0u; m < CPL; m++) { acc[m] *= scale; }
    most = blockMost;
    for (var b = 0u; b < count; b++) {
      let w = exp(p[b] - most);
      sum += w;
      let at = slotRows + (j0 + b) * RW + QK;
      for (var m = 0u; m < CPL; m++) {
        let c = lid + m * WG;
        if (c < C) { acc[m] += w * rows[at + c]; }
      }
    }
    workgroupBarrier();
  }
  if (SPLIT) {
    let at = (t * nwg.y + wid.y) * (C + 2u);
    if (lid == 0u) {
      parts[at] = most;
      parts[at + 1u] = sum;
    }
    for (var m = 0u; m < CPL; m++) {
      let c = lid + m * WG;
      if (c < C) { parts[at + 2u + c] = acc[m]; }
    }
  } else {
    for (var m = 0u; m < CPL; m++) {
      let c = lid + m * WG;
      if (c < C) { x[t * C + c] += acc[m] / sum; }
    }
  }
  if (wid.y == 0u && t == job.y + job.z - 1u) {
    let dst = job.x * STATE + layer.ffn_shift - RAW;
    for (var i = lid; i < RAW; i += WG) { state[dst + i] = mix[TMAX * QK + t * RAW + i]; }
  }
}
