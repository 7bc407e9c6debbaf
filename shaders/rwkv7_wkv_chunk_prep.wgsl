// First pass of the chunked WKV-7 (engine/rwkv7/wkv.ts 'chunk'): what a chunk of TC tokens does to a head's state,
// for every chunk of every job at once (no chunk waits for the one before it).
// A row s of the state (value index i) goes s ← s·A_t + v_i k_tᵀ with A_t = diag(w_t) − kk_t b_tᵀ, and y_i = s·r_t
// after the update. Over a chunk, with P(a..b) = A_a ⋯ A_b:
//   s_end = s_0 G + Σ_τ v_τ E_τ            G = P(1..TC), E_τ = k_τᵀ P(τ+1..TC)
//   y_t   = s_0 · F_t + Σ_τ L[t,τ] v_τ     F_t = P(1..t) r_t, L[t,τ] = k_τᵀ P(τ+1..t) r_t (0 for τ > t)
// All four are the same recurrence run on N + TC "virtual rows": row m < N starts as the unit row e_m with v ≡ 0
// (its final state is row m of G, its output at step t is F_t[m]); row N + τ starts at zero with v = 1 at step τ
// only (final state E_τ, output at step t L[t,τ]). This pass walks those rows through the chunk, as
// rwkv7_wkv_split.wgsl walks real rows (L lanes a row of vec4 columns, ROWS rows a workgroup, row sums by row_sum2),
// and writes G, E, F, L to `chunks`; rwkv7_wkv_chunk_scan.wgsl then carries the real state from chunk to chunk.
// Chunks are numbered over the jobs in order (job j's ceil(count / TC) chunks after those of the jobs before it);
// the dispatch covers the most a sub-pass can have, and workgroups past the last chunk return at once.
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> tm: array<f32>;
@group(0) @binding(5) var<storage, read_write> chunks: array<f32>;

const TC: u32 = {{TC}}u;
const ROWS: u32 = {{ROWS}}u;
/** Virtual rows a head's chunk walks: N for G and F, TC for E and L. */
const VR: u32 = N + TC;
const Q: u32 = N / (4u * L);
const PARTS: u32 = VR / ROWS;
const G_AT: u32 = 0u;
const E_AT: u32 = N * N;
const F_AT: u32 = N * N + TC * N;
const L_AT: u32 = N * N + 2u * TC * N;
/** Floats of one (chunk, head): G [N][N], E [TC][N], F [N][TC] (F_t[m] at m·TC + t), L [TC][TC] (L[t,τ] at τ·TC + t). */
const CHUNK: u32 = N * N + 2u * TC * N + TC * TC;

/** The chunk numbered c: (job, first token, tokens), tokens 0 past the sub-pass's last chunk. */
fn chunk_of(c: u32) -> vec3<u32> {
  var first = 0u;
  for (var j = 0u; j < batch.J; j++) {
    let job = jobs[j];
    let n = (job.z + TC - 1u) / TC;
    if (c < first + n) {
      let k = c - first;
      return vec3<u32>(j, job.y + k * TC, min(TC, job.z - k * TC));
    }
    first += n;
  }
  return vec3<u32>(0u, 0u, 0u);
}

fn tm4(o: u32) -> vec4<f32> {
  return vec4<f32>(tm[o], tm[o + 1u], tm[o + 2u], tm[o + 3u]);
}

@compute @workgroup_size(ROWS * L)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let ch = chunk_of(wid.y);
  if (ch.z == 0u) { return; } // the same for the whole workgroup
  let h = wid.x / PARTS;
  let vr = (wid.x % PARTS) * ROWS + lid / L;
  let q = lid % L;
  var s: array<vec4<f32>, Q>;
  for (var m = 0u; m < Q; m++) {
    let c = 4u * (q + m * L);
    // Unit row e_vr for the first N rows, zeros for the E/L rows.
    s[m] = select(vec4<f32>(0.0), vec4<f32>(vec4<u32>(c, c + 1u, c + 2u, c + 3u) == vec4<u32>(vr)), vr < N);
  }
  // The step at which an E/L row takes its v = 1 (never for the G/F rows).
  let born = select(TC, vr - N, vr >= N);
  let out = (wid.y * (C / N) + h) * CHUNK;
  // As rwkv7_wkv_split.wgsl: one row sum a token carries its output and the next token's removal term.
  var sa = 0.0;
  {
    let head = ch.y * C + h * N;
    var p = 0.0;
    for (var m = 0u; m < Q; m++) { p += dot(s[m], tm4(KK_ * REG + head + 4u * (q + m * L))); }
    sa = row_sum2(vec2<f32>(p, 0.0), lid).x;
  }
  for (var t = 0u; t < ch.z; t++) {
    let head = (ch.y + t) * C + h * N;
    let nhead = select(head, head + C, t + 1u < ch.z);
    let v = select(0.0, 1.0, t == born);
    var py = 0.0;
    var pn = 0.0;
    for (var m = 0u; m < Q; m++) {
      let c = head + 4u * (q + m * L);
      let nv = s[m] * tm4(W_ * REG + c) - sa * tm4(A_ * REG + c) + v * tm4(K_ * REG + c);
      s[m] = nv;
      py += dot(nv, tm4(R_ * REG + c));
      pn += dot(nv, tm4(KK_ * REG + nhead + 4u * (q + m * L)));
    }
    let sums = row_sum2(vec2<f32>(py, pn), lid);
    sa = sums.y;
    if (q == 0u) {
      // F and L stored transposed ([m][t], [τ][t]): the scan's lanes (one a token) then read neighbouring floats.
      if (vr < N) { chunks[out + F_AT + vr * TC + t] = sums.x; } else { chunks[out + L_AT + (vr - N) * TC + t] = sums.x; }
    }
  }
  // Steps past a short last chunk are the identity: F and L rows there are never read.
  let row = select(out + E_AT + (vr - N) * N, out + G_AT + vr * N, vr < N);
  for (var m = 0u; m < Q; m++) {
    let c = row + 4u * (q + m * L);
    chunks[c] = s[m].x;
    chunks[c + 1u] = s[m].y;
    chunks[c + 2u] = s[m].z;
    chunks[c + 3u] = s[m].w;
  }
}
