enable subgroups;
const SUBGROUP32: bool = true;
fn row_subgroup_sum(v: vec4<f32>) -> vec4<f32> { return subgroupAdd(v); }
