// Reorders one [n, k] f16 matrix from the checkpoint's rows into 16×16 blocks (wlayout_blocks.wgsl) at load time, on
// the device: each invocation moves one 32-byte run (16 weights of a row in one block). In JavaScript the same
// reordering cost 2.6 ns a weight, several seconds for a 1.5B model (bench/RESULTS.md "Weights as blocks").
// Offsets are in units of 8 weights (vec4<u32>), the matrix's w_off in its group. by_input 1: the blocks input by
// input (wlayout_input_blocks.wgsl) instead of strip by strip.
struct Move { at: u32, n: u32, k: u32, by_input: u32 }
@group(0) @binding(0) var<uniform> mv: Move;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let c = gid.x + gid.y * nwg.x * 256u;
  let kb16 = mv.k / 16u;
  if (c >= mv.n * kb16) { return; }
  let o = c / kb16;
  let kb = c % kb16;
  let src_at = mv.at + o * (mv.k / 8u) + kb * 2u;
  var dst_at = mv.at + (o / 16u) * 2u * mv.k + kb * 32u + (o % 16u) * 2u;
  if (mv.by_input == 1u) { dst_at = mv.at + (kb * (mv.n / 16u) + o / 16u) * 32u + (o % 16u) * 2u; }
  dst[dst_at] = src[src_at];
  dst[dst_at + 1u] = src[src_at + 1u];
}
