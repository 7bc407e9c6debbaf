// LayerNorm over rows of width C. One workgroup per output row; with GATHER the input row is taken from
// `rows` (used to pick only the tokens whose logits are wanted before the head).
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> lnw: array<f32>;
@group(0) @binding(3) var<storage, read> lnb: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> rows: array<u32>;

const C: u32 = {{C}}u;
const GATHER: bool = {{GATHER}};
const EPS: f32 = 1e-5;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let out_row = wid.x;
  var in_row = out_row;
  if (GATHER) { in_row = rows[out_row]; }
  let base = in_row * C;
  var s = 0.0;
  for (var c = lid; c < C; c += WG) { s += x[base + c]; }
  let mean = wg_sum(s, lid) / f32(C);
  var q = 0.0;
  for (var c = lid; c < C; c += WG) { let d = x[base + c] - mean; q += d * d; }
  let inv = inverseSqrt(wg_sum(q, lid) / f32(C) + EPS);
  let ob = out_row * C;
  for (var c = lid; c < C; c += WG) { y[ob + c] = (x[base + c] - mean) * inv * lnw[c] + lnb[c]; }
}
