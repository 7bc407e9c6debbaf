// One row of the top-logits reduction (engine/rwkv7/top-logits.ts, JOB_WORDS u32), shared by top_logits.wgsl, which
// reduces it, and top_draw.wgsl, which draws from its result and updates its adjustments:
// row: its logits row; adj_off / adj_count: its adjust pairs; out: its result's index; mask: word offset of its
// allowed-rows bitset, 0xffffffff for none.
struct TopJob { row: u32, adj_off: u32, adj_count: u32, out: u32, mask: u32 }
