// Sum over the L lanes of one state row (rwkv7_wkv_split.wgsl) through workgroup memory, for devices whose
// subgroups are missing or narrower than a row's lanes. Every lane of the row adds the same values in the
// same order, so all get the same bits.
const L: u32 = {{L}}u;
var<workgroup> partial: array<vec2<f32>, {{ROWS}}u * L>;

fn row_sum2(v: vec2<f32>, lid: u32) -> vec2<f32> {
  partial[lid] = v;
  workgroupBarrier();
  let first = lid - lid % L;
  var s = partial[first];
  for (var o = 1u; o < L; o++) { s += partial[first + o]; }
  workgroupBarrier();
  return s;
}
