const SUBGROUP32: bool = false;
fn row_subgroup_sum(v: vec4<f32>) -> vec4<f32> { return v; }
