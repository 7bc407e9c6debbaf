// rwkv7_tmix_decode.wgsl without the output product's f16 blocks (tmix_tiles.wgsl).
fn write_zero_tiles(t: u32, h: u32, lid: u32) {}

fn write_tiles(t: u32, h: u32, i: u32, lid: u32, v: f32, lead: bool) {}
