// Weight access for f16 weights: 8 halves packed in one vec4<u32> (the H200's Dawn has no shader-f16).
@group(0) @binding(1) var<storage, read> W: array<vec4<u32>>;
fn load_w8(i: u32) -> mat2x4<f32> {
  let p = W[i];
  return mat2x4<f32>(vec4<f32>(unpack2x16float(p.x), unpack2x16float(p.y)),
                     vec4<f32>(unpack2x16float(p.z), unpack2x16float(p.w)));
}
// Float weights carry no row scale (weights_i8.wgsl has one).
fn weight_row_scale(vrow: u32) -> f32 { return 1.0; }
