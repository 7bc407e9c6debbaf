// Kernel 2 of the chunk-parallel WKV-7 recurrence as straight-line code (the chunkT-lane variants): the same
// product as rwkv7_wkv_chunk_scan.wgsl (that file says what it computes, and why each lane loads its column of
// the next chunk's M while the current one is summed), with the column held in N+T named registers instead of a
// private array walked by a loop (which a compiler may place in memory, one load and store an element a chunk),
// and its sum split over 4 accumulators so a chunk's serial work is (N+T)/4 multiply-adds, not N+T. The code per
// chunk comes from wkv-chunk.ts chunkScanCode.
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> tm: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(5) var<storage, read_write> chunks: array<f32>;

const STATE: u32 = {{STATE}}u;
const CHUNK: u32 = {{CHUNK}}u;
const VROWS: u32 = N + CHUNK;
// Workgroups per head (4 rows each).
const PARTS: u32 = N / 4u;
const H: u32 = C / N;

// [s_0 | v_1..v_T] of the workgroup's 4 rows, column by column: the left side of the chunk's product.
var<workgroup> x: array<vec4<f32>, VROWS>;

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
  // Column `col` of the first chunk's M; lanes of M's first N columns hold no v (col − N wraps past any chunk).
  let at0 = (first * H + h) * VROWS * VROWS + col;
  {{LOAD_FIRST}}
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
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    {{SUM_AND_LOAD}}
    let acc = (a0 + a1) + (a2 + a3);
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
