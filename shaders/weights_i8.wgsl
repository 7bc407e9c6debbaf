// Weight access for int8 weights with one f16 scale per output row (engine/quant/gpu-matrix-group.ts): 8 codes
// in a vec2<u32>, 4 per word, byte j of a word = element j. load_w8 returns the bare codes; the row's scale is
// applied once per output, in mm_common's store (weight_row_scale), not once per weight.
@group(0) @binding(1) var<storage, read> W: array<vec2<u32>>;
fn load_w8(i: u32) -> mat2x4<f32> {
  let p = W[i];
  return mat2x4<f32>(vec4<f32>(unpack4xI8(p.x)), vec4<f32>(unpack4xI8(p.y)));
}
/** Scales from word grp.p0, two f16 a word, by virtual row. */
fn weight_row_scale(vrow: u32) -> f32 {
  let word = grp.p0 + vrow / 2u;
  return unpack2x16float(W[word / 2u][word % 2u])[vrow % 2u];
}
