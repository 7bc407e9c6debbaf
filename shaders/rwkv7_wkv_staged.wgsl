// The WKV-7 state update of rwkv7_wkv.wgsl (one workgroup per (head, job), lane i owns row i), with the state
// loaded and stored coalesced: lane i reading its own row touches a different 256-byte row per lane at every
// step. Here the head's state passes through workgroup memory (N x (N + 1) floats): lane i moves column i
// of each row (neighbouring lanes, neighbouring floats), and rows are padded to N + 1 floats so lane i reading
// its row back (floats i*(N+1) + j) hits a different bank than its neighbours.
// Bindings: wkv_bindings.wgsl.
const PAD: u32 = N + 1u;
var<workgroup> tile: array<f32, N * PAD>;
var<workgroup> sr: array<f32, N>;
var<workgroup> sw: array<f32, N>;
var<workgroup> sk: array<f32, N>;
var<workgroup> skk: array<f32, N>;
var<workgroup> sb: array<f32, N>;

@compute @workgroup_size(N)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let i = lid3.x;
  let h = wid.x;
  let job = jobs[wid.y];
  let head = job.x * STATE + layer.att_kv + h * N * N;
  var s: array<f32, N>;
  for (var k = 0u; k < N; k++) { tile[k * PAD + i] = state[head + k * N + i]; }
  workgroupBarrier();
  for (var j = 0u; j < N; j++) { s[j] = tile[i * PAD + j]; }
  let end = job.y + job.z;
  for (var t = job.y; t < end; t++) {
    let idx = t * C + h * N + i;
    sr[i] = tm[R_ * REG + idx];
    sw[i] = tm[W_ * REG + idx];
    sk[i] = tm[K_ * REG + idx];
    skk[i] = tm[KK_ * REG + idx];
    sb[i] = tm[A_ * REG + idx];
    let vi = tm[V_ * REG + idx];
    workgroupBarrier();
    var sa = 0.0;
    for (var j = 0u; j < N; j++) { sa += s[j] * skk[j]; }
    var out = 0.0;
    for (var j = 0u; j < N; j++) {
      let nv = s[j] * sw[j] - sa * sb[j] + vi * sk[j];
      s[j] = nv;
      out += nv * sr[j];
    }
    tm[Y_ * REG + idx] = out;
    workgroupBarrier();
  }
  for (var j = 0u; j < N; j++) { tile[i * PAD + j] = s[j]; }
  workgroupBarrier();
  for (var k = 0u; k < N; k++) { state[head + k * N + i] = tile[k * PAD + i]; }
}
