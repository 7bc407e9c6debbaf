// Split-K for the tiled products (mm_gemm, mm_sgmat): workgroup z of SPLIT along the dispatch's third axis sums
// one range of K (whole stages of `step` inputs) and writes its partial sum to `part` where the layout part before
// this one puts it (part_index: split_layout.wgsl, or sgtile_layout.wgsl for the tiled product); mm_split_reduce.wgsl then adds the SPLIT partial sums
// of each output in a fixed order and stores them. A tall K (the FFN value product, K = 4C) then spreads over
// more workgroups than its outputs alone give, with the same result whatever the batch (no atomics).
const SPLIT: u32 = {{SPLIT}}u;
@group(0) @binding(5) var<storage, read_write> part: array<f32>;

fn k_span(k: u32, z: u32, step: u32) -> vec2<u32> {
  return k_slice(k, z, SPLIT, step);
}

/** Range z of `parts` equal ranges of K (whole steps; the last ones may be short or empty). */
fn k_slice(k: u32, z: u32, parts: u32, step: u32) -> vec2<u32> {
  let chunk = ((k + parts * step - 1u) / (parts * step)) * step;
  let b = min(k, z * chunk);
  return vec2<u32>(b, min(k, b + chunk));
}

fn emit(s: Seg, t: u32, o: u32, v: f32, z: u32) {
  part[part_index(z, t, s.row0 + o)] = v;
}
