// Weight access for the staged subgroup-matrix kernel (mm_sgstage) on f16 weights: 8 halves per vec4<u32>, so
// a workgroup copies its weight tile into workgroup memory with wide, coalesced loads.
enable f16;
@group(0) @binding(1) var<storage, read> W: array<vec4<u32>>;
/** The 8 weights at index i (units of 8 elements). */
fn load_w8h(i: u32) -> mat2x4<f16> {
  let v = W[i];
  return mat2x4<f16>(vec4<f16>(bitcast<vec2<f16>>(v.x), bitcast<vec2<f16>>(v.y)), vec4<f16>(bitcast<vec2<f16>>(v.z), bitcast<vec2<f16>>(v.w)));
}
// Float weights carry no row scale (weights_i8.wgsl has one).
fn weight_row_scale(vrow: u32) -> f32 { return 1.0; }
