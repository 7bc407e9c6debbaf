// Weight access for f16 weights on a device with shader-f16: the same 8 halves as weights_f16, read as f16
// vectors instead of unpacked from u32 words (same values, so the same results).
enable f16;
@group(0) @binding(1) var<storage, read> W: array<vec4<f16>>;
fn load_w8(i: u32) -> mat2x4<f32> {
  return mat2x4<f32>(vec4<f32>(W[2u * i]), vec4<f32>(W[2u * i + 1u]));
}
// Float weights carry no row scale (weights_i8.wgsl has one).
fn weight_row_scale(vrow: u32) -> f32 { return 1.0; }
