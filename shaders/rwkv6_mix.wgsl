// RWKV-6 data-dependent token shift: input_m = xx + (prev - xx) * (maa_m + lora_m) for m = w, k, v, r, g.
// Reads xx (xn) and prev (mix region 1), writes mix regions 2..6.
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> xn: array<f32>;
@group(0) @binding(2) var<storage, read> tm: array<f32>;
@group(0) @binding(3) var<storage, read> maa: array<f32>;   // [w, k, v, r, g] x C
@group(0) @binding(4) var<storage, read_write> mix: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let c = gid.x;
  let t = gid.y;
  if (c >= C || t >= batch.T) { return; }
  let idx = t * C + c;
  let xv = xn[idx];
  let d = mix[REG + idx] - xv;
  for (var m = 0u; m < 5u; m++) {
    mix[(2u + m) * REG + idx] = xv + d * (maa[m * C + c] + tm[(ML_ + m) * REG + idx]);
  }
}
