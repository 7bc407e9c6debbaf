// Kernel 2 of the chunk-parallel WKV-7 recurrence as straight-line code (the chunkT-lane variants): the same
// product as rwkv7_wkv_chunk_scan.wgsl (that file says what it computes, and why each lane loads its column of
// the next chunk's M while the current one is summed), with two changes:
// - the lane's column of M is held in N+T named registers instead of a private array walked by a loop (which a
//   compiler may place in memory, one load and store an element a chunk);
// - a workgroup carries 4·QUADS state rows, not 4, so each element of M it loads serves that many rows. Every
//   workgroup of a head reads the whole of each chunk's M (at 1.5B × 512 tokens about 300 MB a layer from L2 with
//   4 rows a workgroup), so the reads fall by QUADS while the serial work a chunk grows to QUADS·(N+T) vec4
//   multiply-adds, in QUADS independent chains.
// The code per chunk comes from wkv-chunk.ts chunkScanCode.
// Bindings and sizes: wkv_chunk_scan_common.wgsl.
const QUADS: u32 = {{QUADS}}u;
// State rows a workgroup, and workgroups per head.
const ROWS: u32 = 4u * QUADS;
const PARTS: u32 = N / ROWS;

// [s_0 | v_1..v_T] of the workgroup's rows, column by column, quad q of column m at x[m * QUADS + q]: the left side
// of the chunk's product.
var<workgroup> x: array<vec4<f32>, VROWS * QUADS>;

// Rows 4q..4q+3's v at token tau of the chunk starting at token t0 with n tokens (0 past its end).
fn values(t0: u32, tau: u32, n: u32, at: u32, q: u32) -> vec4<f32> {
  if (tau >= n) { return vec4<f32>(0.0); }
  let o = V_ * REG + (t0 + tau) * C + at + 4u * q;
  return vec4<f32>(tm[o], tm[o + 1u], tm[o + 2u], tm[o + 3u]);
}

@compute @workgroup_size(VROWS)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) col: u32) {
  let h = wid.x / PARTS;
  let i0 = (wid.x % PARTS) * ROWS;
  let at = h * N + i0; // the rows' offset within a token's C values
  let job = jobs[wid.y];
  // This job's first chunk in the batch's numbering: the chunks of the jobs before it.
  var first = 0u;
  for (var j = 0u; j < wid.y; j++) { first += (jobs[j].z + CHUNK - 1u) / CHUNK; }
  let count = (job.z + CHUNK - 1u) / CHUNK;
  let row0 = job.x * STATE + layer.att_kv + h * N * N + i0 * N;
  if (col < N) {
    for (var q = 0u; q < QUADS; q++) {
      let r = row0 + 4u * q * N + col;
      x[col * QUADS + q] = vec4<f32>(state[r], state[r + N], state[r + 2u * N], state[r + 3u * N]);
    }
  }
  if (count == 0u) { return; }
  // Column `col` of the first chunk's M; lanes of M's first N columns hold no v (col − N wraps past any chunk).
  let at0 = (first * H + h) * VROWS * VROWS + col;
  {{LOAD_FIRST}}
  var v: array<vec4<f32>, QUADS>;
  for (var q = 0u; q < QUADS; q++) { v[q] = values(job.y, col - N, min(CHUNK, job.z), at, q); }
  for (var k = 0u; k < count; k++) {
    let t0 = job.y + k * CHUNK;
    let n = min(CHUNK, job.z - k * CHUNK);
    if (col >= N) {
      for (var q = 0u; q < QUADS; q++) { x[col * QUADS + q] = v[q]; }
    }
    workgroupBarrier();
    // The next chunk's column and v (the last chunk's own again after the last: harmless, and no branch).
    let next = min(k + 1u, count - 1u);
    let nt0 = job.y + next * CHUNK;
    let nn = min(CHUNK, job.z - next * CHUNK);
    let nat = (((first + next) * H + h) * VROWS) * VROWS + col;
    {{SUM_AND_LOAD}}
    for (var q = 0u; q < QUADS; q++) { v[q] = values(nt0, col - N, nn, at, q); }
    workgroupBarrier();
    {{STORE_SUMS}}
  }
  if (col < N) {
    for (var q = 0u; q < QUADS; q++) {
      let s = x[col * QUADS + q];
      let r = row0 + 4u * q * N + col;
      state[r] = s.x;
      state[r + N] = s.y;
      state[r + 2u * N] = s.z;
      state[r + 3u * N] = s.w;
    }
  }
}
