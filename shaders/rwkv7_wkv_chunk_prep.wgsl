// Kernel 1 of the chunk-parallel WKV-7 recurrence (the chunkT variants, engine/rwkv7/wkv-chunk.ts): for every
// chunk of T tokens of every job and every head, the (N+T)×(N+T) matrix M through which the chunk acts on any
// state row, written to `chunks` at ((chunk * H + head) * (N+T) + row) * (N+T) + column.
// Per token a state row s (row i: value index i, columns: key index j) does s ← s A_t + v_i k_t with
// A_t = diag(w_t) − kk_t b_tᵀ, then y_i = s·r_t. Over a chunk, with P_{a..b} = A_a ⋯ A_b:
//   s_T = s_0 P_{1..T} + Σ_τ v_τ k_τ P_{τ+1..T},   y_t = s_0 · P_{1..t} r_t + Σ_{τ≤t} v_τ (k_τ P_{τ+1..t} r_t).
// Both are linear in [s_0 | v_1..v_T], and their coefficients are what the same recurrence gives for N+T
// "virtual rows" started from chosen values: row m < N starts at the unit row e_m with v ≡ 0 (its final state
// is row m of P_{1..T}, its output at step t is (P_{1..t} r_t)_m); row N+τ starts at 0 with v = 1 at step τ and
// 0 elsewhere (final state k_τ P_{τ+1..T}, output at step t: k_τ P_{τ+1..t} r_t, 0 before τ). So M's row r is
// [final state of virtual row r | its outputs at steps 1..T], and [s_T | y_1..y_T] = [s_0 | v_1..v_T] M
// (shaders/rwkv7_wkv_chunk_scan.wgsl). Nothing here reads the state, so all chunks run at once; each chain
// is T tokens long, not a whole job. Steps past a short chunk's last token change nothing and output 0.
// The row walk is rwkv7_wkv_split.wgsl's: L lanes a row holding vec4 columns q, q + L, ..., ROWS rows a
// workgroup, one row sum a token carrying that token's output and the next token's removal term.
// Chunks are numbered across the batch's jobs in order (job j's chunks follow those of jobs 0..j−1); the
// dispatch's y covers a bound on their count and workgroups past the last chunk return at once.
// tm is read as vec4s (every offset here is a multiple of 4: C and N are), one load a vector where the split
// kernel's tm4 takes four: the prep is bound by throughput, not by a chain.
// Its bindings are the scan's (WkvPass.bindings); the layer uniform and the state are not read here.
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> tm: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> chunks: array<f32>;

const CHUNK: u32 = {{CHUNK}}u;
const ROWS: u32 = {{ROWS}}u;
// vec4 columns per lane.
const Q: u32 = N / (4u * L);
// Virtual rows, and M's width.
const VROWS: u32 = N + CHUNK;
// Workgroups per (head, chunk).
const PARTS: u32 = (VROWS + ROWS - 1u) / ROWS;
const H: u32 = C / N;

fn tm4(o: u32) -> vec4<f32> {
  return tm[o / 4u];
}


@compute @workgroup_size(ROWS * L)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x / PARTS;
  let vr = (wid.x % PARTS) * ROWS + lid / L;
  let q = lid % L;
  let span = chunk_span(wid.y);
  let n = span.y;
  if (n == 0u) { return; }
  // Rows past the last virtual row (when ROWS does not divide N+T) take part in the sums but write nothing.
  let live = vr < VROWS;
  let out = ((wid.y * H + h) * VROWS + vr) * VROWS;
  var s: array<vec4<f32>, Q>;
  var p = 0.0;
  let first = span.x * C + h * N;
  for (var m = 0u; m < Q; m++) {
    let col = 4u * (q + m * L);
    s[m] = select(vec4<f32>(0.0), vec4<f32>(1.0), vec4<u32>(col, col + 1u, col + 2u, col + 3u) == vec4<u32>(vr));
    p += dot(s[m], tm4(KK_ * REG + first + col));
  }
  var sa = row_sum2(vec2<f32>(p, 0.0), lid).x;
  for (var t = 0u; t < n; t++) {
    let at = (span.x + t) * C + h * N;
    let next = select(at, at + C, t + 1u < n); // the last token's "next" is itself: harmless, and no branch
    let v = select(0.0, 1.0, vr == N + t);
    var py = 0.0;
    var pn = 0.0;
    for (var m = 0u; m < Q; m++) {
      let col = 4u * (q + m * L);
      let ns = s[m] * tm4(W_ * REG + at + col) - sa * tm4(A_ * REG + at + col) + v * tm4(K_ * REG + at + col);
      s[m] = ns;
      py += dot(ns, tm4(R_ * REG + at + col));
      pn += dot(ns, tm4(KK_ * REG + next + col));
    }
    let sums = row_sum2(vec2<f32>(py, pn), lid);
    if (live && q == 0u) { chunks[out + N + t] = sums.x; }
    sa = sums.y;
  }
  if (!live) { return; }
  if (q == 0u) {
    for (var t = n; t < CHUNK; t++) { chunks[out + N + t] = 0.0; }
  }
  for (var m = 0u; m < Q; m++) {
    let o = out + 4u * (q + m * L);
    chunks[o] = s[m].x;
    chunks[o + 1u] = s[m].y;
    chunks[o + 2u] = s[m].z;
    chunks[o + 3u] = s[m].w;
  }
}
