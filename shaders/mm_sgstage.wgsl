// Matrix product on subgroup matrices with both operands staged in workgroup memory: f16 inputs, f32
// accumulation. Weights come as f16 (weights_f16_staged.wgsl) or as int8 codes, exact in f16, whose row scale
// the store applies (weights_i8_staged.wgsl). A workgroup of SGM × SGN subgroups (32 lanes each) computes BM = 16·MT·SGM tokens × BN = 16·NT·SGN
// output rows; subgroup (m, n) owns MT×NT result tiles of 16×16. Each stage copies KC inputs of BN weight rows
// (8 weights per load, coalesced, as f16 from the prelude's load_w8h) and of BM tokens (converted to f16) into workgroup memory; every subgroup then
// loads its matrices from there, so a weight is read from memory once per BM tokens and an activation once per
// BN outputs, against mm_sgmat's strided 16×16 loads of the weights straight from storage.
// The K range and where results go come from the part before this one: mm_whole.wgsl or mm_split.wgsl.
// Offsets depend on subgroup_id, uniform within a subgroup (what the matrix operations need) but not within a
// workgroup (what the default uniformity check proves), hence the diagnostic.
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);

const MT: u32 = {{MT}}u;
const NT: u32 = {{NT}}u;
const SGM: u32 = {{SGM}}u;
const SGN: u32 = {{SGN}}u;
const SGS: u32 = SGM * SGN;
const LANES: u32 = 32u * SGS;
const KC: u32 = {{KC}}u;
const BM: u32 = 16u * MT * SGM;
const BN: u32 = 16u * NT * SGN;
/** Row strides of the staged tiles in f16 elements: padded against bank conflicts, 16-byte aligned. */
const XS: u32 = KC + 8u;
const WS: u32 = KC + 8u;

var<workgroup> xs: array<f16, BM * XS>;
var<workgroup> ws: array<f16, BN * WS>;
var<workgroup> ot: array<f32, SGS * 256u>;

/** Weight loads (8 halves each) and activation loads (4 floats each) per lane a stage. */
const WPT: u32 = (BN * (KC / 8u) + LANES - 1u) / LANES;
const XPT: u32 = (BM * (KC / 4u) + LANES - 1u) / LANES;

/** Part e of a stage's weight tile: 8 weights of one row as f16 (rows past the segment, inputs past the span: zeros). */
fn load_w_part(s: Seg, o0: u32, k0: u32, kend: u32, e: u32) -> mat2x4<f16> {
  let r = e / (KC / 8u);
  let q = e % (KC / 8u);
  if (e < BN * (KC / 8u) && o0 + r < s.n && k0 + q * 8u < kend) { return load_w8h(w8_at(s, o0 + r, k0 + q * 8u)); }
  return mat2x4<f16>();
}

/** Part e of a stage's activation tile: 4 inputs of one token (tokens past the batch: zeros). */
fn load_x_part(s: Seg, rows: u32, t0: u32, k0: u32, kend: u32, e: u32) -> vec4<f32> {
  let t = e / (KC / 4u);
  let kq = e % (KC / 4u);
  if (e < BM * (KC / 4u) && t0 + t < rows && k0 + kq * 4u < kend) { return x[s.x_off + ((t0 + t) * s.k + k0) / 4u + kq]; }
  return vec4<f32>(0.0);
}

@compute @workgroup_size(LANES)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let rows = row_count();
  let s = find_seg(wid.x * BN);
  // The workgroup's first output row within its segment and first token.
  let o0 = wid.x * BN - s.row0;
  let t0 = wid.y * BM;
  let sm = sg / SGN;
  let sn = sg % SGN;
  var acc: array<subgroup_matrix_result<f32, 16, 16>, MT * NT>;
  let span = k_span(s.k, wid.z, KC);
  // The next stage's loads go to registers while the subgroups multiply the current one, so global-memory
  // latency overlaps the matrix work (one stage of prefetch).
  var wr: array<mat2x4<f16>, WPT>;
  var xr: array<vec4<f32>, XPT>;
  for (var i = 0u; i < WPT; i++) { wr[i] = load_w_part(s, o0, span.x, span.y, lid + i * LANES); }
  for (var i = 0u; i < XPT; i++) { xr[i] = load_x_part(s, rows, t0, span.x, span.y, lid + i * LANES); }
  for (var k0 = span.x; k0 < span.y; k0 += KC) {
    for (var i = 0u; i < WPT; i++) {
      let e = lid + i * LANES;
      if (e < BN * (KC / 8u)) {
        let b = (e / (KC / 8u)) * WS + (e % (KC / 8u)) * 8u;
        let v = wr[i];
        ws[b] = v[0].x; ws[b + 1u] = v[0].y; ws[b + 2u] = v[0].z; ws[b + 3u] = v[0].w;
        ws[b + 4u] = v[1].x; ws[b + 5u] = v[1].y; ws[b + 6u] = v[1].z; ws[b + 7u] = v[1].w;
      }
    }
    for (var i = 0u; i < XPT; i++) {
      let e = lid + i * LANES;
      if (e < BM * (KC / 4u)) {
        let b = (e / (KC / 4u)) * XS + (e % (KC / 4u)) * 4u;
        let h = vec4<f16>(xr[i]);
        xs[b] = h.x; xs[b + 1u] = h.y; xs[b + 2u] = h.z; xs[b + 3u] = h.w;
      }
    }
    workgroupBarrier();
    let next = k0 + KC;
    if (next < span.y) {
      for (var i = 0u; i < WPT; i++) { wr[i] = load_w_part(s, o0, next, span.y, lid + i * LANES); }
      for (var i = 0u; i < XPT; i++) { xr[i] = load_x_part(s, rows, t0, next, span.y, lid + i * LANES); }
    }
    for (var kk = 0u; kk < KC; kk += 16u) {
      var a: array<subgroup_matrix_left<f16, 16, 16>, MT>;
      for (var i = 0u; i < MT; i++) {
        a[i] = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>, row_major>(&xs, ((sm * MT + i) * 16u) * XS + kk, XS);
      }
      for (var j = 0u; j < NT; j++) {
        // Weights are [out, in] row-major: the right operand (in × out) column-major.
        let w = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>, col_major>(&ws, ((sn * NT + j) * 16u) * WS + kk, WS);
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
      subgroupMatrixStore<row_major>(&ot, sg * 256u, acc[i * NT + j], 16u);
      workgroupBarrier();
      for (var e = lane; e < 256u; e += 32u) {
        let t = t0 + (sm * MT + i) * 16u + e / 16u;
        let o = o0 + (sn * NT + j) * 16u + e % 16u;
        if (t < rows && o < s.n) { emit(s, t, o, ot[sg * 256u + e], wid.z); }
      }
      workgroupBarrier();
    }
  }
}
