// mm_split_reduce.wgsl storing the next product's f16 blocks (sgtile_blocks_out.wgsl), over the tokens padded to its
// token tiles, those past the batch as zeros.
fn out_rows() -> u32 {
  return padded_rows();
}

fn put(s: Seg, t: u32, o: u32, v: f32, rows: u32) {
  store_block(s, t, o, v, t >= rows);
}
