// After WKV: per-head group norm (eps 64e-5 as the reference), the r*k*r_k "bonus" term, and the gate. With
// post_tiles.wgsl it also writes the output product's f16 blocks (post_no_tiles.wgsl: nothing more).
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> tm: array<f32>;
@group(0) @binding(2) var<storage, read> p: array<f32>;   // [r_k, ln_x.weight, ln_x.bias] x C
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const EPS: f32 = 64e-5;

@compute @workgroup_size(N)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let i = lid3.x;
  let t = wid.y;
  let c = wid.x * N + i;
  if (t >= batch.T) {
    // Dispatched only with the blocks (post_tiles.wgsl), over their padded rows: zeros there.
    write_tiles(t, c, i, 0.0);
    return;
  }
  let idx = t * C + c;
  let yv = tm[Y_ * REG + idx];
  let mean = wg_sum(yv, i) / f32(N);
  let d = yv - mean;
  let inv = inverseSqrt(wg_sum(d * d, i) / f32(N) + EPS);
  let bonus = wg_sum(tm[R_ * REG + idx] * tm[K_ * REG + idx] * p[c], i) * tm[V_ * REG + idx];
  let v = (d * inv * p[C + c] + p[2u * C + c] + bonus) * tm[G_ * REG + idx];
  out[idx] = v;
  write_tiles(t, c, i, v);
}
