// After WKV (RWKV-5/6): per-head group norm (eps 64e-5 as the reference), then the gate silu(g).
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> tm: array<f32>;
@group(0) @binding(2) var<storage, read> lnx: array<f32>;   // [ln_x.weight, ln_x.bias] x C
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const EPS: f32 = 64e-5;

@compute @workgroup_size(N)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let i = lid3.x;
  let t = wid.y;
  let c = wid.x * N + i;
  let idx = t * C + c;
  let yv = tm[Y_ * REG + idx];
  let mean = wg_sum(yv, i) / f32(N);
  let d = yv - mean;
  let inv = inverseSqrt(wg_sum(d * d, i) / f32(N) + EPS);
  let g = tm[G_ * REG + idx];
  out[idx] = (d * inv * lnx[c] + lnx[C + c]) * g * sigmoid(g);
}
