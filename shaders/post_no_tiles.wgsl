// rwkv7_post.wgsl without the output product's f16 blocks (post_tiles.wgsl).
fn write_tiles(t: u32, c: u32, i: u32, v: f32) {}
