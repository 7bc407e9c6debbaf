// The RWKV-7 time mix of a decode step (one token a job) after its projections, in one kernel per (head, job):
// the second LoRA stages for the head's channels, prep (rwkv7_prep.wgsl), the state update and output (the WKV
// recurrence) and post (rwkv7_post.wgsl). Separately those are four dispatches a layer, each mostly launch and
// barrier at batch 1. The arithmetic is theirs; only the order of the sums differs (float rounding).
// The workgroup is N rows × L lanes: lane q of row i holds the row's vec4 columns q, q + L, ... (as the split
// WKV kernel), and in the LoRA stage lane (i, q) computes LoRA outputs q, q + L, ... of channel i.
// Inputs: r, k, v in tm's regions, the first LoRA stages' outputs (activations applied) in tm from float HID on
// (segment s at x_off of the group uniform, as the separate product reads them). Output: the gated, normalized
// head output in `out`, the state updated in place, and v_first on layer 0.
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
struct Seg { row0: u32, n: u32, k: u32, w_off: u32, x_off: u32, y_off: u32, act: u32, flags: u32 }
struct Group { segs: array<Seg, 8>, count: u32, use_r: u32, p0: u32, p1: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
// binding 1: W, the second LoRA stages w2, a2, g2 (, v2), through the weight prelude (weights_*.wgsl) and the
// group's layout part (wlayout_*.wgsl).
@group(0) @binding(2) var<uniform> layer: Layer;
@group(0) @binding(3) var<uniform> grp: Group;
@group(0) @binding(4) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> tm: array<f32>;
@group(0) @binding(6) var<storage, read> pp: array<f32>;   // [w0, a0, v0, k_k, k_a] x C
@group(0) @binding(7) var<storage, read> pq: array<f32>;   // [r_k, ln_x.weight, ln_x.bias] x C
@group(0) @binding(8) var<storage, read_write> vfirst: array<f32>;
@group(0) @binding(9) var<storage, read_write> state: array<vec4<f32>>;
@group(0) @binding(10) var<storage, read_write> out: array<f32>;

const STATE: u32 = {{STATE}}u;
const L: u32 = {{L}}u;
const FIRST: bool = {{FIRST}};
// Steps of 8 LoRA inputs whose loads are issued together (Rwkv7Runtime.tmixLoraLoads, RWKV_TMIX_LORA_LOADS).
const LU: u32 = {{LU}}u;
const WGS: u32 = N * L;
// vec4 columns per lane.
const Q: u32 = N / (4u * L);
const EPS: f32 = 64e-5;

// Row sums (row_sum); sums over the whole workgroup are wg_sum's (wg_sum.wgsl or wg_sum_subgroup.wgsl, WG = WGS).
var<workgroup> rowred: array<f32, WGS>;
// The head's LoRA outputs (w, a, g, v LoRA; N each) and prepared vectors.
var<workgroup> hl: array<f32, 4u * N>;
var<workgroup> hr: array<f32, N>;
var<workgroup> hw: array<f32, N>;
var<workgroup> hk: array<f32, N>;
var<workgroup> hkk: array<f32, N>;
var<workgroup> hb: array<f32, N>;
var<workgroup> hv: array<f32, N>;

/** Sum over the L lanes of row `i`, the same order on each (every lane calls it). */
fn row_sum(v: f32, lid: u32, i: u32) -> f32 {
  rowred[lid] = v;
  workgroupBarrier();
  var r = 0.0;
  for (var q = 0u; q < L; q++) { r += rowred[i * L + q]; }
  workgroupBarrier();
  return r;
}

/** Output row `o` of LoRA segment `s` for token `t`: its weights against the first stage's output. */
fn lora_out(s: Seg, t: u32, o: u32) -> f32 {
  let xb = s.x_off * 4u + t * s.k;
  var acc = 0.0;
  var k = 0u;
  // LU steps of 8 inputs a trip, every load of the trip issued before the first sum: one step at a time, each
  // step's loads waited for the previous sum's. The sums are added in the same order either way (same bits).
  for (; k + 8u * LU <= s.k; k += 8u * LU) {
    var m: array<mat2x4<f32>, LU>;
    var x: array<vec4<f32>, 2u * LU>;
    for (var u = 0u; u < LU; u++) {
      let ku = k + 8u * u;
      m[u] = load_w8(w8_at(s, o, ku));
      x[2u * u] = vec4<f32>(tm[xb + ku], tm[xb + ku + 1u], tm[xb + ku + 2u], tm[xb + ku + 3u]);
      x[2u * u + 1u] = vec4<f32>(tm[xb + ku + 4u], tm[xb + ku + 5u], tm[xb + ku + 6u], tm[xb + ku + 7u]);
    }
    for (var u = 0u; u < LU; u++) { acc += dot(m[u][0], x[2u * u]) + dot(m[u][1], x[2u * u + 1u]); }
  }
  for (; k < s.k; k += 8u) {
    let m = load_w8(w8_at(s, o, k));
    let x0 = vec4<f32>(tm[xb + k], tm[xb + k + 1u], tm[xb + k + 2u], tm[xb + k + 3u]);
    let x1 = vec4<f32>(tm[xb + k + 4u], tm[xb + k + 5u], tm[xb + k + 6u], tm[xb + k + 7u]);
    acc += dot(m[0], x0) + dot(m[1], x1);
  }
  return acc;
}

fn h4(a: ptr<workgroup, array<f32, N>>, c: u32) -> vec4<f32> {
  return vec4<f32>((*a)[c], (*a)[c + 1u], (*a)[c + 2u], (*a)[c + 3u]);
}

@compute @workgroup_size(WGS)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  if (wid.y >= batch.J) {
    // Dispatched only with the output product's blocks (tmix_tiles.wgsl), over their padded rows: zeros there.
    write_zero_tiles(wid.y, h, lid);
    return;
  }
  let job = jobs[wid.y];
  let t = job.y; // the job's one token
  let i = lid / L;
  let q = lid % L;
  let c = h * N + i;
  let idx = t * C + c;
  let lead = q == 0u; // the lane that owns channel i in prep and post

  // Second LoRA stages: lane (i, q) computes outputs q, q + L, ... (of w, a, g, v) of channel c.
  for (var o = q; o < grp.count; o += L) { hl[o * N + i] = lora_out(grp.segs[o], t, c); }
  workgroupBarrier();

  // prep
  var kv = 0.0;
  var av = 0.0;
  var kkv = 0.0;
  if (lead) {
    kv = tm[K_ * REG + idx];
    av = sigmoid(pp[C + c] + hl[N + i]);
    kkv = kv * pp[3u * C + c];
  }
  let norm = sqrt(wg_sum(kkv * kkv, lid));
  if (lead) {
    let kkn = kkv / max(norm, 1e-12);
    hkk[i] = kkn;
    hb[i] = kkn * av;
    hk[i] = kv * (1.0 + (av - 1.0) * pp[4u * C + c]);
    hw[i] = exp(-0.606531 * sigmoid(pp[c] + hl[i]));
    hr[i] = tm[R_ * REG + idx];
    var vv = tm[V_ * REG + idx];
    if (FIRST) {
      vfirst[idx] = vv;
    } else {
      vv = vv + (vfirst[idx] - vv) * sigmoid(pp[2u * C + c] + hl[3u * N + i]);
    }
    hv[i] = vv;
  }
  workgroupBarrier();

  // s = s*diag(w) - (s kk)(kk*a)^T + v k^T, y = s r; row i of the head's [value, key] state.
  let row = (job.x * STATE + layer.att_kv + h * N * N + i * N) / 4u;
  var s: array<vec4<f32>, Q>;
  var pk = 0.0;
  for (var m = 0u; m < Q; m++) {
    s[m] = state[row + q + m * L];
    pk += dot(s[m], h4(&hkk, 4u * (q + m * L)));
  }
  let sa = row_sum(pk, lid, i);
  let vi = hv[i];
  var py = 0.0;
  for (var m = 0u; m < Q; m++) {
    let col = 4u * (q + m * L);
    let nv = s[m] * h4(&hw, col) - sa * h4(&hb, col) + vi * h4(&hk, col);
    state[row + q + m * L] = nv;
    py += dot(nv, h4(&hr, col));
  }
  let y = row_sum(py, lid, i);

  // post: group norm over the head, the r*k*r_k bonus, the gate.
  let mean = wg_sum(select(0.0, y, lead), lid) / f32(N);
  let d = y - mean;
  let inv = inverseSqrt(wg_sum(select(0.0, d * d, lead), lid) / f32(N) + EPS);
  let bonus = wg_sum(select(0.0, hr[i] * hk[i] * pq[c], lead), lid) * vi;
  let v = (d * inv * pq[C + c] + pq[2u * C + c] + bonus) * hl[2u * N + i];
  if (lead) { out[idx] = v; }
  write_tiles(t, h, i, lid, v, lead);
}
