// Matrix product on subgroup matrices (the GPU's matrix units, e.g. tensor cores): f16 inputs, f32 accumulation.
// A workgroup of SGS subgroups of 32 lanes computes BM = 16·MT tokens × BN = 16·NT·SGS output rows; each subgroup
// owns MT×NT result tiles of 16×16 side by side along the outputs. Activations (f32) are converted to f16 into
// workgroup memory KC inputs at a time, shared by the subgroups; weights ([out, in] row-major, so the right
// operand stored column-major) are loaded straight from storage, each weight once per BM tokens: all of a stage's
// weight matrices before the stage's activations are staged, so a subgroup has KC/16 · NT loads in flight instead
// of one round trip per step of 16 (the loop bodies are generated, one named variable per matrix: sgtile-code.ts).
// The K range and where results go come from the part before this one: mm_whole.wgsl (all of K, into y) or
// mm_split.wgsl (one of SPLIT ranges of K, a partial sum into `part`; mm_split_reduce.wgsl adds them).
// Offsets depend on subgroup_id, which is uniform within a subgroup (what the matrix operations need) but not
// within a workgroup (what the default uniformity check proves), hence the diagnostic.
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);

const MT: u32 = {{MT}}u;
const NT: u32 = {{NT}}u;
const SGS: u32 = {{SGS}}u;
const KC: u32 = {{KC}}u;
const BM: u32 = 16u * MT;
const BN: u32 = 16u * NT * SGS;
/** Row stride of the activation tile in f16 elements: padded against bank conflicts, 16-byte aligned. */
const XS: u32 = KC + 8u;

var<workgroup> xs: array<f16, BM * XS>;
var<workgroup> ot: array<f32, SGS * 256u>;

@compute @workgroup_size(32u * SGS)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let rows = row_count();
  let s = find_seg(wid.x * BN);
  let o0 = wid.x * BN - s.row0 + sg * 16u * NT;
  let t0 = wid.y * BM;
  let span = k_span(s.k, wid.z, KC);
  let wstride = w_tile_stride(s);
  // The loops' bodies are generated (engine/rwkv7/sgtile-code.ts stagedRowsCode): one named variable per matrix.
  {{ACCUMULATORS}}
  for (var k0 = span.x; k0 < span.y; k0 += KC) {
    // The stage's weight matrices first: their loads are in flight while the activations are staged.
    {{WLOADS}}
    // Stage BM tokens × KC inputs as f16 (rows past the batch as zeros).
    for (var e = lid; e < BM * KC / 4u; e += 32u * SGS) {
      let t = e / (KC / 4u);
      let kq = e % (KC / 4u);
      var v = vec4<f32>(0.0);
      if (t0 + t < rows && k0 + kq * 4u < span.y) { v = x[s.x_off + ((t0 + t) * s.k + k0) / 4u + kq]; }
      let h = vec4<f16>(v);
      let b = t * XS + kq * 4u;
      xs[b] = h.x;
      xs[b + 1u] = h.y;
      xs[b + 2u] = h.z;
      xs[b + 3u] = h.w;
    }
    workgroupBarrier();
    // Widths are multiples of 32, not of KC: a last stage may be half full.
    {{MULTIPLIES}}
    workgroupBarrier();
  }
  // Epilogue through workgroup memory: activation, residual accumulation and bounds per element.
  {{EPILOGUE}}
}
