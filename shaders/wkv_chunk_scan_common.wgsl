// What both chunk scans (rwkv7_wkv_chunk_scan.wgsl, rwkv7_wkv_chunk_scan_flat.wgsl) bind and size beyond the five
// common WKV bindings (wkv_bindings.wgsl): the chunk scratch holding each chunk's (N+T)×(N+T) matrix M.
@group(0) @binding(5) var<storage, read_write> chunks: array<f32>;

const CHUNK: u32 = {{CHUNK}}u;
const VROWS: u32 = N + CHUNK;
const H: u32 = C / N;
