// ln_shift.wgsl without the next product's f16 blocks (ln_shift_tiles.wgsl): the rows of the batch only, as f32 mixes.
const WRITE_ROWS: bool = true;

fn write_tiles(t: u32, c: u32, a: array<f32, M>, b: array<f32, M>) {}
