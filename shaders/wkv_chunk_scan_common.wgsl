// What both chunk scans (rwkv7_wkv_chunk_scan.wgsl, rwkv7_wkv_chunk_scan_flat.wgsl) bind and size: the five common
// WKV bindings (wkv.ts WKV_BINDINGS) and the chunk scratch holding each chunk's (N+T)×(N+T) matrix M.
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> tm: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;
@group(0) @binding(5) var<storage, read_write> chunks: array<f32>;

const STATE: u32 = {{STATE}}u;
const CHUNK: u32 = {{CHUNK}}u;
const VROWS: u32 = N + CHUNK;
const H: u32 = C / N;
