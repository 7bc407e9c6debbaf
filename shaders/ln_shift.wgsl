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
// A lane takes two neighbouring columns at a time, so that with ln_shift_tiles.wgsl it also writes them, as one word
// of f16 pairs, into the f16 blocks the next product reads (ln_shift_no_tiles.wgsl: nothing more).
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
// Column pairs a workgroup of a split writes (C is even: heads of a multiple of 4).
const PW: u32 = (C / 2u + SPLIT - 1u) / SPLIT;
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

/**
 * Column c of token t (statistics cur, the previous row's prv): normalized into xn (and the slot's shift state with
 * SAVE), mixed with the previous token into the M copies of y, which it returns.
 */
fn column(t: u32, c: u32, cur: vec2<f32>, prv: vec2<f32>, prow: u32, first: bool, slot: u32, off: u32) -> array<f32, M> {
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
  var mixes = array<f32, M>();
  for (var m = 0u; m < M; m++) {
    mixes[m] = xv + d * mixw[m * C + c];
    // Not where every product that reads the mixes takes the blocks instead (ln_shift_tiles.wgsl WRITE_ROWS).
    if (WRITE_ROWS) { y[(m * TMAX + t) * C + c] = mixes[m]; }
  }
  return mixes;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let t = wid.x;
  // The workgroup's column pairs (a pair is one word of the f16 blocks).
  let p1 = min(C / 2u, (wid.y + 1u) * PW);
  if (t >= batch.T) {
    // Dispatched only with the f16 blocks, over their padded rows: these rows are zeros there, as the tiling pass
    // wrote them.
    for (var p = wid.y * PW + lid; p < p1; p += WG) { write_tiles(t, 2u * p, array<f32, M>(), array<f32, M>()); }
    return;
  }
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
  for (var p = wid.y * PW + lid; p < p1; p += WG) {
    let c = 2u * p;
    let a = column(t, c, cur, prv, prow, first, slot, off);
    let b = column(t, c + 1u, cur, prv, prow, first, slot, off);
    write_tiles(t, c, a, b);
  }
}
