// RWKV-7a's DeepEmbed gate on the channel mix's hidden layer, one workgroup per token t:
//   u  = xf · s1                                  [32]   (xf = ln2(x), not the token-shifted input)
//   SE = s_emb[tok] + e[tok] · s_emb_xᵀ           [1024] (the second term precomputed per token in `se`)
//   ss[j] = Σ_m u[m] · SE[32m + j]                [32]   (the row viewed 32×32, row-major)
//   h *= ss · s2 + s0                             [F]
// The reference merges SE into one table at load; that costs V·1024·C multiply-adds per layer (minutes for a
// 65536-token vocabulary), so the e·s_emb_xᵀ half is a small product per token instead (runtime.ts).
// Binding 1 (W, the layer's s_emb table in the weight precision) comes from the weight-format prelude.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read> xn: array<f32>;   // [T, C]
@group(0) @binding(4) var<storage, read> se: array<f32>;   // [T, 1024]: this layer's e·s_emb_xᵀ
@group(0) @binding(5) var<storage, read> p: array<f32>;    // s1 [C, 32], s2 [32, F], s0 [F]
@group(0) @binding(6) var<storage, read_write> h: array<f32>; // [T, F]: relu(key · kin)²

const C: u32 = {{C}}u;
const F: u32 = {{F}}u;
const WG: u32 = 256u;
const S2: u32 = C * 32u;
const S0: u32 = S2 + 32u * F;

var<workgroup> part: array<f32, WG>;
var<workgroup> u: array<f32, 32>;
var<workgroup> prod: array<f32, 1024>;
var<workgroup> ss: array<f32, 32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let t = wid.x;
  // u: 8 partial sums per output (lanes m, m+32, …), s1's rows read 32 floats at a time.
  let m = lid % 32u;
  var s = 0.0;
  for (var c = lid / 32u; c < C; c += WG / 32u) { s += xn[t * C + c] * p[c * 32u + m]; }
  part[lid] = s;
  workgroupBarrier();
  if (lid < 32u) {
    var a = 0.0;
    for (var q = 0u; q < WG / 32u; q++) { a += part[q * 32u + lid]; }
    u[lid] = a;
  }
  workgroupBarrier();
  // The token's SE row, 8 entries a lane (all within one 32-wide row of the 32×32 view), times u of that row.
  if (lid < 128u) {
    let w = load_w8(ids[t] * 128u + lid);
    let base = lid * 8u;
    let um = u[lid / 4u];
    for (var k = 0u; k < 8u; k++) {
      prod[base + k] = um * (w[k / 4u][k % 4u] + se[t * 1024u + base + k]);
    }
  }
  workgroupBarrier();
  if (lid < 32u) {
    var a = 0.0;
    for (var r = 0u; r < 32u; r++) { a += prod[r * 32u + lid]; }
    ss[lid] = a;
  }
  workgroupBarrier();
  for (var f = lid; f < F; f += WG) {
    var g = p[S0 + f];
    for (var j = 0u; j < 32u; j++) { g += ss[j] * p[S2 + j * F + f]; }
    h[t * F + f] *= g;
  }
}
