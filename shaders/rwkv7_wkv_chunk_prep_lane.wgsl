// Kernel 1 of the chunk-parallel WKV-7 recurrence, one lane a virtual row (the chunkT-lane variants,
// engine/rwkv7/wkv-chunk.ts). It builds the same matrix M as rwkv7_wkv_chunk_prep.wgsl (that file says what M is
// and why it is [final state | outputs] of N+T virtual rows), written to `chunks` in the same layout, so the scan
// is shared. What differs is who holds a row: there, L lanes share a row and sum its dot products across lanes
// each token, and every row re-reads the chunk's token vectors (about 2 GB a layer at 1.5B × 512 tokens, from
// L2); here one workgroup is one (chunk, head) with one lane a virtual row holding all N columns in registers,
// so the five vectors of a token are read at one address by every lane of the workgroup (one broadcast load a
// vec4 for all its rows) and a row's sums are a lane's own multiply-adds, with no shuffles or barriers.
// The per-token code is straight-line over the row's N/4 vec4 columns (generated: wkv-chunk.ts
// chunkLaneCode), so the row stays in registers. Its chain a token is N/4 multiply-adds of a vec4 accumulator.
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> tm: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> chunks: array<vec4<f32>>;

const CHUNK: u32 = {{CHUNK}}u;
// Virtual rows, M's width, and the workgroup's lanes.
const VROWS: u32 = N + CHUNK;
const H: u32 = C / N;


@compute @workgroup_size(VROWS)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) vr: u32) {
  let h = wid.x;
  let span = chunk_span(wid.y);
  let n = span.y;
  if (n == 0u) { return; }
  // M's row vr, in vec4s (every offset a multiple of 4: N and T are).
  let out = (((wid.y * H + h) * VROWS + vr) * VROWS) / 4u;
  // Row m < N starts at the unit row e_m (its removal term s·kk of the first token is kk's element m); row N + τ
  // starts at 0.
  {{INIT}}
  let first = span.x * C + h * N;
  let kk0 = KK_ * REG + first + min(vr, N - 1u);
  var sa = select(0.0, tm[kk0 / 4u][kk0 % 4u], vr < N);
  var y = vec4<f32>(0.0);
  for (var t = 0u; t < CHUNK; t++) {
    // Uniform in the workgroup: a short chunk's missing tokens output 0 and leave the row as it is.
    if (t < n) {
      let at = ((span.x + t) * C + h * N) / 4u;
      let next = select(at, at + C / 4u, t + 1u < n); // the last token's "next" is itself: harmless
      let w = W_ * REG / 4u + at;
      let a = A_ * REG / 4u + at;
      let k = K_ * REG / 4u + at;
      let r = R_ * REG / 4u + at;
      let kn = KK_ * REG / 4u + next;
      let v = select(0.0, 1.0, vr == N + t);
      var py = vec4<f32>(0.0);
      var pn = vec4<f32>(0.0);
      {{STEP}}
      y[t % 4u] = dot(py, vec4<f32>(1.0));
      sa = dot(pn, vec4<f32>(1.0));
    }
    if (t % 4u == 3u) {
      chunks[out + (N + t - 3u) / 4u] = y;
      y = vec4<f32>(0.0);
    }
  }
  {{STORE}}
}
