// The WKV-7 state update, sequential over each job's tokens. One workgroup per (head, job); lane i owns row i
// (value index) of the head's N x N state: s = s*diag(w) - (s kk)(kk*a)^T + v k^T, y = s r.
// Bindings: wkv_bindings.wgsl.
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
  let base = job.x * STATE + layer.att_kv + h * N * N + i * N;
  var s: array<f32, N>;
  for (var j = 0u; j < N; j++) { s[j] = state[base + j]; }
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
  for (var j = 0u; j < N; j++) { state[base + j] = s[j]; }
}
