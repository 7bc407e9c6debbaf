// Shared parts of the matrix kernels. One dispatch computes a group of up to 8 independent products
// y_s = act_s(W_s x_s) (+ y_s when accumulating into the residual stream), e.g. receptance, key and value
// together, the first stages of all four LoRAs, or both at once in a decode step: fewer dispatches, fewer
// barriers, fuller GPU.
// Each segment owns a range of "virtual" output rows starting at a multiple of 64, so no workgroup
// straddles two segments. Weights of all segments sit in one buffer at w_off (in units of 8 elements).
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
struct Seg { row0: u32, n: u32, k: u32, w_off: u32, x_off: u32, y_off: u32, act: u32, flags: u32 }
// p0: the word where a quantised group's scales start (weights_i8 / weights_nf4), else 0.
struct Group { segs: array<Seg, 8>, count: u32, use_r: u32, p0: u32, p1: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> grp: Group;

const ACCUM: u32 = 1u;

// Branch-free: a subgroup-matrix store whose address went through a branch here ran the whole tiled product
// 1.8× slower on the H200 (bench/RESULTS.md "Tiled activations").
fn row_count() -> u32 {
  return select(batch.T, batch.R, grp.use_r != 0u);
}

fn find_seg(vrow: u32) -> Seg {
  var s = grp.segs[0];
  for (var i = 1u; i < grp.count; i++) {
    if (vrow >= grp.segs[i].row0) { s = grp.segs[i]; }
  }
  return s;
}

/** Output o of segment s from its sum v0: the row's scale, then the segment's activation. */
fn activated(s: Seg, o: u32, v0: f32) -> f32 {
  var v = v0 * weight_row_scale(s.row0 + o);
  if (s.act == 1u) { v = tanh(v); }
  else if (s.act == 2u) { v = 1.0 / (1.0 + exp(-v)); }
  else if (s.act == 3u) { let r = max(v, 0.0); v = r * r; }
  return v;
}

fn store(s: Seg, t: u32, o: u32, v0: f32) {
  var v = activated(s, o, v0);
  let idx = s.y_off + t * s.n + o;
  if ((s.flags & ACCUM) != 0u) { v += y[idx]; }
  y[idx] = v;
}
