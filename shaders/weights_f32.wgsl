// Weight access for f32 weights, same interface as the f16 variant.
@group(0) @binding(1) var<storage, read> W: array<vec4<f32>>;
fn load_w8(i: u32) -> mat2x4<f32> {
  return mat2x4<f32>(W[2u * i], W[2u * i + 1u]);
}
// Float weights carry no row scale (weights_i8.wgsl has one).
fn weight_row_scale(vrow: u32) -> f32 { return 1.0; }
