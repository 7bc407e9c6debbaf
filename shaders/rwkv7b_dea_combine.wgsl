// RWKV-7b's DEA attention split over ranges of cached rows (rwkv7b_dea_attend.wgsl with SPLIT): one workgroup per
// token joins its ranges' partial softmaxes, x[t] += Σ_s e^(m_s − M)·acc_s / Σ_s e^(m_s − M)·sum_s with M the
// largest m_s (an empty range has m = −3e38 and sum 0, so it weighs nothing).
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<storage, read> parts: array<f32>;   // [T, S, 2 + C]: max, sum, V sum
@group(0) @binding(2) var<storage, read_write> x: array<f32>;  // [T, C]

const C: u32 = {{C}}u;
const S: u32 = {{S}}u;
const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let t = wid.x;
  let base = t * S * (C + 2u);
  var most = -3.0e38;
  for (var s = 0u; s < S; s++) { most = max(most, parts[base + s * (C + 2u)]); }
  var sum = 0.0;
  for (var s = 0u; s < S; s++) {
    let at = base + s * (C + 2u);
    sum += exp(parts[at] - most) * parts[at + 1u];
  }
  for (var c = lid; c < C; c += WG) {
    var a = 0.0;
    for (var s = 0u; s < S; s++) {
      let at = base + s * (C + 2u);
      a += exp(parts[at] - most) * parts[at + 2u + c];
    }
    x[t * C + c] += a / sum;
  }
}
