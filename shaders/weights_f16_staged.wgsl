// Weight access for the staged subgroup-matrix kernel (mm_sgstage): f16 weights read as 8 halves per
// vec4<u32>, so a workgroup copies its weight tile into workgroup memory with wide, coalesced loads.
enable f16;
@group(0) @binding(1) var<storage, read> W4: array<vec4<u32>>;
// Float weights carry no row scale (weights_i8.wgsl has one).
fn weight_row_scale(vrow: u32) -> f32 { return 1.0; }
