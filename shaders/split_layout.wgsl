// Where a split product's partial sums go (mm_split.wgsl, mm_split_reduce.wgsl): [split z][token][virtual row], with
// grp.p1 virtual rows. (The tiled product lays them out in whole tiles instead: sgtile_layout.wgsl.)
fn part_index(z: u32, t: u32, v: u32) -> u32 {
  return (z * row_count() + t) * grp.p1 + v;
}
