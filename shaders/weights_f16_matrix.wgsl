// Weight access for the subgroup-matrix kernel: f16 weights as scalars, the element type subgroupMatrixLoad
// needs (it loads 16×16 tiles itself).
enable f16;
@group(0) @binding(1) var<storage, read> W: array<f16>;
// Float weights carry no row scale (weights_i8.wgsl has one).
fn weight_row_scale(vrow: u32) -> f32 { return 1.0; }
