// Shared epilogue of the matrix kernels: y = act(W x) (+ y when accumulating into the residual stream).
// Shapes and options are uniforms rather than baked constants: one pipeline then serves every matrix, which
// keeps shader compilation (slow on CPU drivers) to a handful of pipelines per model.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
struct Mat { K: u32, N: u32, act: u32, flags: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> mat: Mat;

const ACCUM: u32 = 1u;
const USE_R: u32 = 2u;

fn row_count() -> u32 {
  if ((mat.flags & USE_R) != 0u) { return batch.R; }
  return batch.T;
}

fn store(t: u32, o: u32, v0: f32) {
  var v = v0;
  if (mat.act == 1u) { v = tanh(v); }
  else if (mat.act == 2u) { v = 1.0 / (1.0 + exp(-v)); }
  else if (mat.act == 3u) { let r = max(v, 0.0); v = r * r; }
  let idx = t * mat.N + o;
  if ((mat.flags & ACCUM) != 0u) { v += y[idx]; }
  y[idx] = v;
}
