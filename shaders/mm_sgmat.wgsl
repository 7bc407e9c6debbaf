// Matrix product on subgroup matrices (the GPU's matrix units, e.g. tensor cores): f16 inputs, f32 accumulation.
// A workgroup of SGS subgroups of 32 lanes computes BM = 16·MT tokens × BN = 16·NT·SGS output rows; each subgroup
// owns MT×NT result tiles of 16×16 side by side along the outputs. Activations (f32) are converted to f16 into
// workgroup memory KC inputs at a time, shared by the subgroups; weights ([out, in] row-major, so the right
// operand stored column-major) are loaded straight from storage, each weight once per BM tokens.
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
  var acc: array<subgroup_matrix_result<f32, 16, 16>, MT * NT>;
  let span = k_span(s.k, wid.z, KC);
  for (var k0 = span.x; k0 < span.y; k0 += KC) {
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
    for (var kk = 0u; kk < KC && k0 + kk < span.y; kk += 16u) {
      var a: array<subgroup_matrix_left<f16, 16, 16>, MT>;
      for (var i = 0u; i < MT; i++) {
        a[i] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&xs, i * 16u * XS + kk, false, XS);
      }
      for (var j = 0u; j < NT; j++) {
        let w = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(
          &W, w_tile_at(s, o0 + j * 16u, k0 + kk), true, w_tile_stride(s));
        for (var i = 0u; i < MT; i++) {
          acc[i * NT + j] = subgroupMatrixMultiplyAccumulate(a[i], w, acc[i * NT + j]);
        }
      }
    }
    workgroupBarrier();
  }
  // Epilogue through workgroup memory: activation, residual accumulation and bounds per element.
  for (var i = 0u; i < MT; i++) {
    for (var j = 0u; j < NT; j++) {
      subgroupMatrixStore(&ot, sg * 256u, acc[i * NT + j], false, 16u);
      workgroupBarrier();
      for (var e = lane; e < 256u; e += 32u) {
        let t = t0 + i * 16u + e / 16u;
        let o = o0 + j * 16u + e % 16u;
        if (t < rows && o < s.n) { emit(s, t, o, ot[sg * 256u + e], wid.z); }
      }
      workgroupBarrier();
    }
  }
}
