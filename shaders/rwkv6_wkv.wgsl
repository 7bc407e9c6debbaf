// The RWKV-5/6 WKV state update, sequential over each job's tokens. One workgroup per (head, job); lane i owns
// row i (value index) of the head's N x N state, kept [value, key] like RWKV-7's:
// y_i = sum_j r_j (u_j k_j v_i + S_ij), then S_ij = S_ij w_j + k_j v_i, with w = exp(-exp(time_decay (+ lora))).
// Bindings 0–4: wkv_bindings.wgsl.
@group(0) @binding(5) var<storage, read> p: array<f32>;   // [time_decay, time_faaaa] x C

/** RWKV-6: the decay has a data-dependent part (tm region W_); RWKV-5: static. */
const DYNAMIC: bool = {{DYNAMIC}};
var<workgroup> sr: array<f32, N>;
var<workgroup> sk: array<f32, N>;
var<workgroup> sw: array<f32, N>;
var<workgroup> su: array<f32, N>;

@compute @workgroup_size(N)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let i = lid3.x;
  let h = wid.x;
  let c = h * N + i;
  let job = jobs[wid.y];
  let base = job.x * STATE + layer.att_kv + h * N * N + i * N;
  var s: array<f32, N>;
  for (var j = 0u; j < N; j++) { s[j] = state[base + j]; }
  su[i] = p[C + c];
  let end = job.y + job.z;
  for (var t = job.y; t < end; t++) {
    let idx = t * C + c;
    sr[i] = tm[R_ * REG + idx];
    sk[i] = tm[K_ * REG + idx];
    var wl = p[c];
    if (DYNAMIC) { wl += tm[W_ * REG + idx]; }
    sw[i] = exp(-exp(wl));
    let vi = tm[V_ * REG + idx];
    workgroupBarrier();
    var out = 0.0;
    for (var j = 0u; j < N; j++) {
      let kv = sk[j] * vi;
      out += sr[j] * (su[j] * kv + s[j]);
      s[j] = s[j] * sw[j] + kv;
    }
    tm[Y_ * REG + idx] = out;
    workgroupBarrier();
  }
  for (var j = 0u; j < N; j++) { state[base + j] = s[j]; }
}
