// RWKV-7b's DEA attention, first half: each token's new row of its slot's key/value cache, and its query.
// One workgroup per token t of the sub-pass (../shared/golden/README.md "RWKV-7a and RWKV-7b"):
//   q = qq·x, k̃ = (x·k1·k2) ⊙ KE[tok], ṽ = tanh(x·v1·v2) ⊙ VE[tok]        (the products ran before: `proj`, `kv`)
//   KE[tok] = k_emb[tok] + e·k_emb_xᵀ, VE alike                           (the e·…ᵀ halves precomputed in `kv`)
//   q' = q + (q₋₁ − q) ⊙ x_q, k' and v' alike, with the previous token's raw q, k̃, ṽ: the token before in the
//   sub-pass (recomputed here, so no workgroup waits for another), or the slot's state for its first token;
//   Q = LN(q'; lnq), K = LN(k'; lnk), V = LN(v'; lnv), eps 1e-5.
// K and V go to the slot's cache at the token's position (the slot's rows before the sub-pass + its index in
// the segment); Q and the raw q, k̃, ṽ to `mix` for the second half (rwkv7b_dea_attend.wgsl), which also saves
// the last token's raw ones as the slot's shift state (this kernel only reads the state, so nothing races).
// Binding 1 (W: k_emb [V, 256] then v_emb [V, C] at VOFF, units of 8) comes from the weight-format prelude.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(2) var<uniform> layer: Layer;
@group(0) @binding(3) var<storage, read> ids: array<u32>;
@group(0) @binding(4) var<storage, read> jobs: array<vec4<u32>>;   // slot, first token, tokens, rows before
@group(0) @binding(5) var<storage, read> proj: array<f32>;         // q [TMAX, 256], kc, vc (unused here)
@group(0) @binding(6) var<storage, read> kv: array<f32>;           // k [TMAX, 256], v [TMAX, C], then per layer e·k_emb_xᵀ, e·v_emb_xᵀ
@group(0) @binding(7) var<storage, read> vecs: array<f32>;         // x_q, x_k, x_v, lnq w b, lnk w b, lnv w b
@group(0) @binding(8) var<storage, read> state: array<f32>;
@group(0) @binding(9) var<storage, read_write> rows: array<f32>;   // this layer's cache [slots, CAP, 256 + C]
@group(0) @binding(10) var<storage, read_write> mix: array<f32>;   // Q [TMAX, 256], raw q, k̃, ṽ [TMAX, 512 + C]

const C: u32 = {{C}}u;
const QK: u32 = 256u;
const TMAX: u32 = {{TMAX}}u;
const STATE: u32 = {{STATE}}u;
const CAP: u32 = {{CAP}}u;
const VOFF: u32 = {{VOFF}}u;
const RW: u32 = QK + C;
const RAW: u32 = 2u * QK + C;
const WG: u32 = 256u;
const EPS: f32 = 1e-5;

var<workgroup> part: array<vec3<f32>, WG>;

/** Element i of the table row starting at unit `base` (units of 8 elements). */
fn table_at(base: u32, i: u32) -> f32 {
  let w = load_w8(base + i / 8u);
  let k = i % 8u;
  return w[k / 4u][k % 4u];
}

fn k_raw(u: u32, i: u32, e: u32) -> f32 {
  return kv[u * QK + i] * (table_at(ids[u] * (QK / 8u), i) + kv[e + u * QK + i]);
}

fn v_raw(u: u32, c: u32, e: u32) -> f32 {
  return kv[TMAX * QK + u * C + c] * (table_at(VOFF + ids[u] * (C / 8u), c) + kv[e + TMAX * QK + u * C + c]);
}

/** The three sums (q, k, v parts) over the workgroup. */
fn wg_sum3(v: vec3<f32>, lid: u32) -> vec3<f32> {
  part[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { part[lid] += part[lid + s]; }
    workgroupBarrier();
  }
  let r = part[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let t = wid.x;
  var job = jobs[0];
  for (var j = 1u; j < batch.J; j++) {
    if (t >= jobs[j].y) { job = jobs[j]; }
  }
  let first = t == job.y;
  let slotState = job.x * STATE + layer.ffn_shift - RAW;  // dea_q, dea_k, dea_v sit just before ffn_x
  let e = TMAX * RW * (1u + layer.index);
  let row = (job.x * CAP + job.w + (t - job.y)) * RW;
  let vo = 6u * QK + C;  // lnv weight; bias at + C
  var sums = vec3<f32>(0.0);
  for (var i = lid; i < QK; i += WG) {
    let q = proj[t * QK + i];
    let k = k_raw(t, i, e);
    var qp = state[slotState + i];
    var kp = state[slotState + QK + i];
    if (!first) {
      qp = proj[(t - 1u) * QK + i];
      kp = k_raw(t - 1u, i, e);
    }
    mix[TMAX * QK + t * RAW + i] = q;
    mix[TMAX * QK + t * RAW + QK + i] = k;
    let qs = q + (qp - q) * vecs[i];
    let ks = k + (kp - k) * vecs[QK + i];
    mix[t * QK + i] = qs;
    rows[row + i] = ks;
    sums += vec3<f32>(qs, ks, 0.0);
  }
  for (var c = lid; c < C; c += WG) {
    let v = v_raw(t, c, e);
    var vp = state[slotState + 2u * QK + c];
    if (!first) { vp = v_raw(t - 1u, c, e); }
    mix[TMAX * QK + t * RAW + 2u * QK + c] = v;
    let vs = v + (vp - v) * vecs[2u * QK + c];
    rows[row + QK + c] = vs;
    sums.z += vs;
  }
  let mean = wg_sum3(sums, lid) / vec3<f32>(f32(QK), f32(QK), f32(C));
  // Each lane reads back only what it wrote itself.
  var sq = vec3<f32>(0.0);
  for (var i = lid; i < QK; i += WG) {
    let dq = mix[t * QK + i] - mean.x;
    let dk = rows[row + i] - mean.y;
    sq += vec3<f32>(dq * dq, dk * dk, 0.0);
  }
  for (var c = lid; c < C; c += WG) {
    let dv = rows[row + QK + c] - mean.z;
    sq.z += dv * dv;
  }
  let r = inverseSqrt(wg_sum3(sq, lid) / vec3<f32>(f32(QK), f32(QK), f32(C)) + vec3<f32>(EPS));
  let lq = 2u * QK + C;
  for (var i = lid; i < QK; i += WG) {
    mix[t * QK + i] = (mix[t * QK + i] - mean.x) * r.x * vecs[lq + i] + vecs[lq + QK + i];
    rows[row + i] = (rows[row + i] - mean.y) * r.y * vecs[lq + 2u * QK + i] + vecs[lq + 3u * QK + i];
  }
  for (var c = lid; c < C; c += WG) {
    rows[row + QK + c] = (rows[row + QK + c] - mean.z) * r.z * vecs[vo + c] + vecs[vo + C + c];
  }
}
