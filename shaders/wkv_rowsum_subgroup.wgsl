// Sum over the L lanes of one state row (rwkv7_wkv_split.wgsl) by subgroup shuffles: a butterfly, so every
// lane of the row ends with the same bits (each step adds the same two halves, in either order). Needs the
// row's L consecutive lanes inside one subgroup: subgroups of at least L lanes, formed from consecutive
// invocation indices (what Vulkan drivers do for one-dimensional workgroups).
enable subgroups;
const L: u32 = {{L}}u;

fn row_sum2(v: vec2<f32>, lid: u32) -> vec2<f32> {
  var s = v;
  for (var o = 1u; o < L; o = o << 1u) { s += subgroupShuffleXor(s, o); }
  return s;
}
