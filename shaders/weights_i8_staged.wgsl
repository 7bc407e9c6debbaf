// Weight access for the staged subgroup-matrix kernel (mm_sgstage) on int8 weights (the layout of
// weights_i8.wgsl): 8 codes per vec2<u32>, widened to f16, which holds every code in -127..127 exactly, so the
// matrix units multiply the codes themselves; the row's f16 scale is applied once per output, in mm_common's store.
enable f16;
@group(0) @binding(1) var<storage, read> W: array<vec2<u32>>;
/** The 8 codes at index i (units of 8 elements). */
fn load_w8h(i: u32) -> mat2x4<f16> {
  let p = W[i];
  return mat2x4<f16>(vec4<f16>(unpack4xI8(p.x)), vec4<f16>(unpack4xI8(p.y)));
}
/** Scales from word grp.p0, two f16 a word, by virtual row. */
fn weight_row_scale(vrow: u32) -> f32 {
  let word = grp.p0 + vrow / 2u;
  return unpack2x16float(W[word / 2u][word % 2u])[vrow % 2u];
}
