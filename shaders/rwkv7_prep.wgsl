// RWKV-7 per-token quantities before the state update: decay w, the normalized removal key kk, the
// in-context learning rate a (stored as kk*a), the adjusted key k, and the value residual mix with layer 0's
// value (v_first).
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read_write> tm: array<f32>;
@group(0) @binding(2) var<storage, read_write> vfirst: array<f32>;
@group(0) @binding(3) var<storage, read> p: array<f32>;         // [w0, a0, v0, k_k, k_a] x C

const FIRST: bool = {{FIRST}};

@compute @workgroup_size(N)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let i = lid3.x;
  let t = wid.y;
  let c = wid.x * N + i;
  let idx = t * C + c;
  let kv = tm[K_ * REG + idx];
  let av = sigmoid(p[C + c] + tm[A_ * REG + idx]);
  let kkv = kv * p[3u * C + c];
  let norm = sqrt(wg_sum(kkv * kkv, i));
  let kkn = kkv / max(norm, 1e-12);
  tm[KK_ * REG + idx] = kkn;
  tm[A_ * REG + idx] = kkn * av;
  tm[K_ * REG + idx] = kv * (1.0 + (av - 1.0) * p[4u * C + c]);
  tm[W_ * REG + idx] = exp(-0.606531 * sigmoid(p[c] + tm[W_ * REG + idx]));
  if (FIRST) {
    vfirst[idx] = tm[V_ * REG + idx];
  } else {
    let vv = tm[V_ * REG + idx];
    tm[V_ * REG + idx] = vv + (vfirst[idx] - vv) * sigmoid(p[2u * C + c] + tm[VL_ * REG + idx]);
  }
}
