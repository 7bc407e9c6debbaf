// The five bindings every WKV kernel of RWKV-5/6/7 starts with (for RWKV-7, engine/rwkv7/wkv.ts WKV_BINDINGS: one bind
// group serves every variant), as the kernels that read the time mix and the state as plain floats declare them.
struct Layer { att_shift: u32, att_kv: u32, ffn_shift: u32, index: u32 }
@group(0) @binding(0) var<uniform> batch: Batch;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read> jobs: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> tm: array<f32>;
@group(0) @binding(4) var<storage, read_write> state: array<f32>;

const STATE: u32 = {{STATE}}u;
