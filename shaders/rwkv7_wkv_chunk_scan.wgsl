// Second pass of the chunked WKV-7 (rwkv7_wkv_chunk_prep.wgsl says what G, E, F, L are): each job's state goes
// from chunk to chunk, s_end = s_0 G + Σ_τ v_τ E_τ, and each token's output is y_t = s_0 · F_t + Σ_τ L[t,τ] v_τ.
// Rows are independent: a workgroup holds RS rows of one head in workgroup memory, lane j of a row computes
// column j of its next state (N multiply-adds over G's column j plus TC over E's) and, for the chunk's first TC
// lanes, one token's output; a chunk costs two barriers, not TC dependent row sums. The chunk's G, E, F, L are
// copied into workgroup memory by all lanes at once (coalesced), and the next chunk's are loaded into registers
// while this one is computed: read from storage inside the multiply-add loops, each of a chunk's N + TC loads was
// a round trip (H200: 672–909 µs a 1.5B layer of 512 tokens, against 191 for the split kernel). Dispatched as
// (H · N / RS, jobs).
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> tm: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(5) var<storage, read_write> chunks: array<f32>;

const STATE: u32 = {{STATE}}u;
const TC: u32 = {{TC}}u;
const RS: u32 = {{RS}}u;
const E_AT: u32 = N * N;
const F_AT: u32 = N * N + TC * N;
const L_AT: u32 = N * N + 2u * TC * N;
const CHUNK: u32 = N * N + 2u * TC * N + TC * TC;

/** The chunk's G, E, F, L (rwkv7_wkv_chunk_prep.wgsl's layout). */
var<workgroup> gs: array<f32, CHUNK>;
/** Floats of a chunk each lane copies. */
const PER: u32 = (CHUNK + RS * N - 1u) / (RS * N);
/** The rows' current state, [row][column]. */
var<workgroup> st: array<f32, RS * N>;
/** The rows' v of the chunk's tokens, [row][token] (0 past the chunk's end). */
var<workgroup> vs: array<f32, RS * TC>;

@compute @workgroup_size(RS * N)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x / (N / RS);
  let r = lid / N;
  let j = lid % N;
  let i = (wid.x % (N / RS)) * RS + r;
  let job = jobs[wid.y];
  // The job's first chunk: those of the jobs before it come first (as rwkv7_wkv_chunk_prep.wgsl numbers them).
  var c0 = 0u;
  for (var p = 0u; p < wid.y; p++) { c0 += (jobs[p].z + TC - 1u) / TC; }
  let at = job.x * STATE + layer.att_kv + h * N * N + i * N + j;
  st[r * N + j] = state[at];
  let count = (job.z + TC - 1u) / TC;
  var next: array<f32, PER>;
  if (count > 0u) {
    let base = (c0 * (C / N) + h) * CHUNK;
    for (var e = 0u; e < PER; e++) {
      let x = lid + e * RS * N;
      if (x < CHUNK) { next[e] = chunks[base + x]; }
    }
  }
  for (var c = 0u; c < count; c++) {
    let t0 = job.y + c * TC;
    let n = min(TC, job.z - c * TC);
    for (var e = 0u; e < PER; e++) {
      let x = lid + e * RS * N;
      if (x < CHUNK) { gs[x] = next[e]; }
    }
    if (j < TC) {
      var v = 0.0;
      if (j < n) { v = tm[V_ * REG + (t0 + j) * C + h * N + i]; }
      vs[r * TC + j] = v;
    }
    workgroupBarrier();
    if (c + 1u < count) {
      let base = ((c0 + c + 1u) * (C / N) + h) * CHUNK;
      for (var e = 0u; e < PER; e++) {
        let x = lid + e * RS * N;
        if (x < CHUNK) { next[e] = chunks[base + x]; }
      }
    }
    // Column j of the row's next state; two partial sums halve the dependent chain.
    var a0 = 0.0;
    var a1 = 0.0;
    for (var m = 0u; m < N; m += 2u) {
      a0 += st[r * N + m] * gs[m * N + j];
      a1 += st[r * N + m + 1u] * gs[(m + 1u) * N + j];
    }
    for (var u = 0u; u < TC; u++) { a0 += vs[r * TC + u] * gs[E_AT + u * N + j]; }
    // Token j's output.
    if (j < n) {
      var y0 = 0.0;
      var y1 = 0.0;
      for (var m = 0u; m < N; m += 2u) {
        y0 += st[r * N + m] * gs[F_AT + m * TC + j];
        y1 += st[r * N + m + 1u] * gs[F_AT + (m + 1u) * TC + j];
      }
      for (var u = 0u; u <= j; u++) { y0 += gs[L_AT + u * TC + j] * vs[r * TC + u]; }
      tm[Y_ * REG + (t0 + j) * C + h * N + i] = y0 + y1;
    }
    workgroupBarrier();
    st[r * N + j] = a0 + a1;
  }
  workgroupBarrier();
  state[at] = st[r * N + j];
}
