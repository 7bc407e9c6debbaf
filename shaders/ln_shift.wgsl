// Layer norm fused with the token shift that follows it: normalizes token t (kept in xn for the state
// save) and mixes it with the normalized previous token of the same slot, which is recomputed here for
// tokens inside a batch, or read from the slot's saved state for a slot's first token. Writes M mixed
// copies, copy m at m*TMAX rows. One workgroup per token. With SAVE (a step where every job has one token, so
// token t is its slot's first and last) the normalized token is also stored as the slot's shift state here,
// after it was read, instead of in a separate save_shift dispatch: one dispatch fewer per norm in decode steps.
// SPLIT workgroups share a token (dispatch T x SPLIT), each writing a 1/SPLIT slice of the columns after computing
// the row statistics itself: with one workgroup a token, a decode step's norm ran on one compute unit for its whole
// length (latency-bound at small batches). With SAVE every token is its slot's first, so the previous row's
// statistics are not needed.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> tok: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> ln: array<f32>;     // [weight; bias] x C
@group(0) @binding(5) var<storage, read_write> state: array<f32>; // written only with SAVE
@group(0) @binding(6) var<storage, read> mixw: array<f32>;   // [M, C]
@group(0) @binding(7) var<storage, read_write> xn: array<f32>;
@group(0) @binding(8) var<storage, read_write> y: array<f32>;

const C: u32 = {{C}}u;
const M: u32 = {{M}}u;
const TMAX: u32 = {{TMAX}}u;
const STATE: u32 = {{STATE}}u;
const FFN: bool = {{FFN}};
const SAVE: bool = {{SAVE}};
const SPLIT: u32 = {{SPLIT}}u;
const CW: u32 = (C + SPLIT - 1u) / SPLIT;
const EPS: f32 = 1e-5;

/** Mean and 1/std of row `row` of x. */
fn stats(row: u32, lid: u32) -> vec2<f32> {
  var s = 0.0;
  for (var c = lid; c < C; c += WG) { s += x[row * C + c]; }
  let mean = wg_sum(s, lid) / f32(C);
  var q = 0.0;
  for (var c = lid; c < C; c += WG) { let d = x[row * C + c] - mean; q += d * d; }
  return vec2<f32>(mean, inverseSqrt(wg_sum(q, lid) / f32(C) + EPS));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let t = wid.x;
  let cur = stats(t, lid);
  // Statistics of the previous row are computed unconditionally (but for SAVE, a constant) so barriers stay in
  // uniform control flow.
  let prow = max(t, 1u) - 1u;
  var prv = vec2<f32>(0.0, 0.0);
  if (!SAVE) { prv = stats(prow, lid); }
  let info = tok[t];
  let slot = info & 0x7fffffffu;
  let first = (info >> 31u) != 0u;
  var off = layer.att_shift;
  if (FFN) { off = layer.ffn_shift; }
  let c1 = min(C, (wid.y + 1u) * CW);
  for (var c = wid.y * CW + lid; c < c1; c += WG) {
    let xv = (x[t * C + c] - cur.x) * cur.y * ln[c] + ln[C + c];
    xn[t * C + c] = xv;
    var prev: f32;
    if (first) {
      prev = state[slot * STATE + off + c];
    } else {
      prev = (x[prow * C + c] - prv.x) * prv.y * ln[c] + ln[C + c];
    }
    if (SAVE) { state[slot * STATE + off + c] = xv; }
    let d = prev - xv;
    for (var m = 0u; m < M; m++) {
      y[(m * TMAX + t) * C + c] = xv + d * mixw[m * C + c];
    }
  }
}
