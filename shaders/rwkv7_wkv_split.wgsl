// The WKV-7 state update with each row of a head's N x N state split over L lanes, for more parallelism per
// token than one lane per row (rwkv7_wkv.wgsl). Rows are independent: row i needs only itself and the head's
// shared r, w, k, kk, b vectors, so a head's rows are spread over N / ROWS workgroups of ROWS rows each,
// dispatched as (H * N / ROWS, jobs). Lane q of a row holds the row's vec4 columns q, q + L, q + 2L, ...: a
// subgroup's lanes then load and store whole 256-byte rows, so the state moves through memory coalesced.
// The two dot products per token (s kk for the removal, s r for the output) are sums over a row's lanes
// (row_sum2: subgroup shuffles or workgroup memory, chosen at build). Each token's reduction carries the
// output of that token and the removal term of the next one, so a token costs one reduction, not two; the next
// token's vectors are loaded while the current one is computed, which keeps their latency off the chain.
// s = s*diag(w) - (s kk)(b)^T + v k^T with b = kk*a, y = s r (the state layout is [head, value i, key j]).
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> tm: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<vec4<f32>>;

const STATE: u32 = {{STATE}}u;
const ROWS: u32 = {{ROWS}}u;
// vec4 columns per lane.
const Q: u32 = N / (4u * L);
// Workgroups per head.
const PARTS: u32 = N / ROWS;

fn tm4(o: u32) -> vec4<f32> {
  return vec4<f32>(tm[o], tm[o + 1u], tm[o + 2u], tm[o + 3u]);
}

@compute @workgroup_size(ROWS * L)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x / PARTS;
  let i = (wid.x % PARTS) * ROWS + lid / L;
  let q = lid % L;
  let job = jobs[wid.y];
  let row = (job.x * STATE + layer.att_kv + h * N * N + i * N) / 4u;
  var s: array<vec4<f32>, Q>;
  for (var m = 0u; m < Q; m++) { s[m] = state[row + q + m * L]; }
  let end = job.y + job.z;
  // The token's inputs, loaded while the previous token is computed (kk one more token ahead).
  var r: array<vec4<f32>, Q>;
  var w: array<vec4<f32>, Q>;
  var k: array<vec4<f32>, Q>;
  var b: array<vec4<f32>, Q>;
  var kk: array<vec4<f32>, Q>;
  var v = 0.0;
  var sa = 0.0;
  if (job.z > 0u) {
    let head = job.y * C + h * N;
    var p = 0.0;
    for (var m = 0u; m < Q; m++) {
      let c = head + 4u * (q + m * L);
      r[m] = tm4(R_ * REG + c);
      w[m] = tm4(W_ * REG + c);
      k[m] = tm4(K_ * REG + c);
      b[m] = tm4(A_ * REG + c);
      kk[m] = tm4(KK_ * REG + c);
      p += dot(s[m], kk[m]);
    }
    v = tm[V_ * REG + head + i];
    sa = row_sum2(vec2<f32>(p, 0.0), lid).x;
  }
  for (var t = job.y; t < end; t++) {
    let head = t * C + h * N;
    let more = t + 1u < end;
    let nhead = select(head, head + C, more); // the last token reloads itself: harmless, and no branch
    var py = 0.0;
    var pn = 0.0;
    for (var m = 0u; m < Q; m++) {
      let nc = nhead + 4u * (q + m * L);
      let nkk = tm4(KK_ * REG + nc);
      let nv = s[m] * w[m] - sa * b[m] + v * k[m];
      s[m] = nv;
      py += dot(nv, r[m]);
      pn += dot(nv, nkk);
      r[m] = tm4(R_ * REG + nc);
      w[m] = tm4(W_ * REG + nc);
      k[m] = tm4(K_ * REG + nc);
      b[m] = tm4(A_ * REG + nc);
    }
    v = tm[V_ * REG + nhead + i];
    let sums = row_sum2(vec2<f32>(py, pn), lid);
    if (q == 0u) { tm[Y_ * REG + head + i] = sums.x; }
    sa = sums.y;
  }
  for (var m = 0u; m < Q; m++) { state[row + q + m * L] = s[m]; }
}
