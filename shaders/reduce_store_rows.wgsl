// mm_split_reduce.wgsl storing f32 rows (store(): activation, accumulation), over the batch's tokens.
fn out_rows() -> u32 {
  return row_count();
}

fn put(s: Seg, t: u32, o: u32, v: f32, rows: u32) {
  store(s, t, o, v);
}
