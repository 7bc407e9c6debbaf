// Kernel 2 of the chunk-parallel WKV-7 recurrence (the chunkT variants, engine/rwkv7/wkv-chunk.ts): the state
// carried through a job's chunks in order. For each state row i and chunk, with M the chunk's (N+T)×(N+T)
// matrix for this head (shaders/rwkv7_wkv_chunk_prep.wgsl) and v_τ the row's value at the chunk's token τ:
//   [s_T | y_1..y_T] = [s_0 | v_1..v_T] M
// the row's state after the chunk and its outputs at the chunk's tokens. One workgroup per (head, 4 rows, job),
// one lane per column of M: lane c forms column c for the workgroup's 4 rows at once, as a vec4 (each element
// of M loaded once for the 4 rows, its loads coalesced along M's rows), from the rows' [s_0 | v] held in
// workgroup memory as one vec4 per column. A chunk's serial work is then N+T vec4 multiply-adds between two
// barriers, where the token-by-token kernels chain T row reductions. M does not depend on the state, so each
// lane loads its column of the next chunk's M (and its v) while the current chunk is summed, which keeps the
// loads' latency off the chain. A short chunk's missing tokens have zero rows in M and v = 0 here; their y is
// not written.
// Bindings and sizes: wkv_chunk_scan_common.wgsl.
// Workgroups per head (4 rows each).
const PARTS: u32 = N / 4u;

// [s_0 | v_1..v_T] of the workgroup's 4 rows, column by column: the left side of the chunk's product.
var<workgroup> x: array<vec4<f32>, VROWS>;

// Column `col` of M of chunk `c` (numbered across the batch) for head h.
fn column(c: u32, h: u32, col: u32) -> array<f32, VROWS> {
  var g: array<f32, VROWS>;
  let at = (c * H + h) * VROWS * VROWS + col;
  for (var m = 0u; m < VROWS; m++) { g[m] = chunks[at + m * VROWS]; }
  return g;
}

// The 4 rows' v at token tau of the chunk starting at token t0 with n tokens (0 past its end).
fn values(t0: u32, tau: u32, n: u32, at: u32) -> vec4<f32> {
  if (tau >= n) { return vec4<f32>(0.0); }
  let o = V_ * REG + (t0 + tau) * C + at;
  return vec4<f32>(tm[o], tm[o + 1u], tm[o + 2u], tm[o + 3u]);
}

@compute @workgroup_size(VROWS)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) col: u32) {
  let h = wid.x / PARTS;
  let i0 = (wid.x % PARTS) * 4u;
  let at = h * N + i0; // the 4 rows' offset within a token's C values
  let job = jobs[wid.y];
  // This job's first chunk in the batch's numbering: the chunks of the jobs before it.
  var first = 0u;
  for (var j = 0u; j < wid.y; j++) { first += (jobs[j].z + CHUNK - 1u) / CHUNK; }
  let count = (job.z + CHUNK - 1u) / CHUNK;
  let row0 = job.x * STATE + layer.att_kv + h * N * N + i0 * N;
  if (col < N) { x[col] = vec4<f32>(state[row0 + col], state[row0 + N + col], state[row0 + 2u * N + col], state[row0 + 3u * N + col]); }
  if (count == 0u) { return; }
  // Lanes of M's first N columns hold no v: for them col − N wraps past any chunk, and values() gives 0.
  var g = column(first, h, col);
  var v = values(job.y, col - N, min(CHUNK, job.z), at);
  for (var k = 0u; k < count; k++) {
    let t0 = job.y + k * CHUNK;
    let n = min(CHUNK, job.z - k * CHUNK);
    if (col >= N) { x[col] = v; }
    workgroupBarrier();
    // The next chunk's column and v (the last chunk's own again after the last: harmless, and no branch).
    let next = min(k + 1u, count - 1u);
    let nt0 = job.y + next * CHUNK;
    let nn = min(CHUNK, job.z - next * CHUNK);
    let nat = (((first + next) * H + h) * VROWS) * VROWS + col;
    var acc = vec4<f32>(0.0);
    for (var m = 0u; m < VROWS; m++) {
      acc += x[m] * g[m];
      g[m] = chunks[nat + m * VROWS];
    }
    v = values(nt0, col - N, nn, at);
    workgroupBarrier();
    if (col < N) {
      x[col] = acc;
    } else if (col - N < n) {
      let o = Y_ * REG + (t0 + col - N) * C + at;
      tm[o] = acc.x;
      tm[o + 1u] = acc.y;
      tm[o + 2u] = acc.z;
      tm[o + 3u] = acc.w;
    }
  }
  if (col < N) {
    let s = x[col];
    state[row0 + col] = s.x;
    state[row0 + N + col] = s.y;
    state[row0 + 2u * N + col] = s.z;
    state[row0 + 3u * N + col] = s.w;
  }
}
