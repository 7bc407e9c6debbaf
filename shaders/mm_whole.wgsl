// A tiled product over all of K in one workgroup (mm_gemm, mm_sgmat): its result goes through store().
fn k_span(k: u32, z: u32, step: u32) -> vec2<u32> { return vec2<u32>(0u, k); }
fn emit(s: Seg, t: u32, o: u32, v: f32, z: u32) { store(s, t, o, v); }
