// Lays out an RWKV-7 checkpoint for the CPU kernels (engine/cpu/kernels/kernels.ts) through the CPU weight writer
// (engine/cpu/cpu-weight-writer.ts: panels of 8 output rows in f16, f32 or int8; the normalized embedding; small
// vectors f32; int8 in the layers `quantLayers` covers). `planRwkv7Cpu` reserves addresses in the arena and keeps
// the host copies, yielding to the event loop between matrices; `CpuWeightPlan.write` copies them into the memory
// once it exists.

import type { Checkpoint, ModelInfo } from '../types';
import { toF16Bits, toF32 } from '../loader/dtype';
import type { Arena } from '../cpu/arena';
import { MAX_PAGES } from '../cpu/wasm-kernels';
import { DEEP_EMBED_ROW } from '../model-spec';
import { type CpuCommonWeights, type CpuMatrix, CpuWeightWriter, type CpuWeightStorage } from '../cpu/cpu-weight-writer';
import { type CpuDeaLayer, planDeaLayers } from './cpu-dea-weights';

/** Addresses (bytes) of one layer's weights; see weights.ts for the meaning of each group. */
export interface CpuLayer {
  /** [weight; bias], 2C floats each. */
  ln1: number;
  ln2: number;
  /** x_r, x_w, x_k, x_v, x_a, x_g: 6C floats. */
  attMix: number;
  r: CpuMatrix;
  k: CpuMatrix;
  v: CpuMatrix;
  o: CpuMatrix;
  /** LoRA first stages (from C to the rank) and second stages (back to C); v only after layer 0. */
  w1: CpuMatrix;
  a1: CpuMatrix;
  g1: CpuMatrix;
  v1: CpuMatrix | null;
  w2: CpuMatrix;
  a2: CpuMatrix;
  g2: CpuMatrix;
  v2: CpuMatrix | null;
  /** w0, a0, v0, k_k, k_a: 5C floats. */
  prep: number;
  /** r_k, ln_x.weight, ln_x.bias: 3C floats. */
  post: number;
  /** ffn x_k: C floats. */
  ffnMix: number;
  ffnK: CpuMatrix;
  ffnV: CpuMatrix;
}

/** RWKV-7a's DeepEmbed gate of one layer (kernels.ts `deepEmbedGate`). */
export interface CpuDeepEmbedLayer {
  /** s_emb.weight [V, 1024], f16 (f32 when `wide`), row-major: only the rows of the tokens run are read. */
  table: number;
  /** s1 [C, 32], s2 [32, F], s0 [F] as the checkpoint stores them ([in, out]), f32. */
  gate: number;
  /** s_emb_x.weight [1024, C]: applied to a token's normalized embedding, the e·s_emb_xᵀ half of its SE row. */
  sx: CpuMatrix;
}

/** Everything the forward pass needs to find the weights; plain data, so it can be posted to a worker. */
export interface CpuWeights extends CpuCommonWeights {
  /** RWKV-7a and 7b, one entry per layer. */
  deepEmbed?: CpuDeepEmbedLayer[];
  /** RWKV-7b only, one entry per layer: the DEA attention (cpu-dea-weights.ts). */
  dea?: CpuDeaLayer[];
  layers: CpuLayer[];
  /** Largest LoRA rank, for sizing scratch. */
  maxLora: number;
}

export interface CpuWeightPlan {
  weights: CpuWeights;
  /** Copies every host array to its address; call once the memory exists. */
  write(memory: WebAssembly.Memory): void;
}

export async function planRwkv7Cpu(arena: Arena, ck: Checkpoint, info: ModelInfo, storage: CpuWeightStorage): Promise<CpuWeightPlan> {
  const { precision } = storage;
  const C = info.nEmbd;
  const wide = precision === 'f32';
  const deepEmbedded = info.version === 'v7a' || info.version === 'v7b';
  if (deepEmbedded) {
    // A real 7a model's tables dwarf its other weights (12 layers of a 65536-token vocabulary: 1.5 GiB as f16);
    // refused before any host copy is made when they alone cannot fit the kernels' memory.
    const bytesPer = wide ? 4 : 2;
    const tableBytes = info.nLayer * info.vocabSize * DEEP_EMBED_ROW * bytesPer;
    if (tableBytes > MAX_PAGES * 65536)
      throw new RangeError(
        `the RWKV-7a DeepEmbed tables need ${tableBytes} bytes (${info.nLayer} layers × ${info.vocabSize} tokens × ${DEEP_EMBED_ROW} × ${bytesPer}), ` +
          `more than the CPU backend's 4 GiB of WebAssembly memory${wide ? '; try precision f16' : ''}`,
      );
  }
  const w = new CpuWeightWriter(arena, ck, storage, C);
  const common = await w.common();
  const vals = (name: string) => w.vals(name);
  const stack = (parts: Float32Array[]) => w.stack(parts);
  const linear = (name: string): Promise<CpuMatrix> => w.matrix(w.linear(name));
  const lora = (name: string): Promise<CpuMatrix> => w.matrix(w.lora(name));

  let maxLora = 8;
  const layers: CpuLayer[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    const first = l === 0;
    const layer: CpuLayer = {
      ln1: stack([vals(`${p}ln1.weight`), vals(`${p}ln1.bias`)]),
      ln2: stack([vals(`${p}ln2.weight`), vals(`${p}ln2.bias`)]),
      attMix: stack(['x_r', 'x_w', 'x_k', 'x_v', 'x_a', 'x_g'].map((n) => vals(a + n))),
      r: await linear(`${a}receptance.weight`),
      k: await linear(`${a}key.weight`),
      v: await linear(`${a}value.weight`),
      o: await linear(`${a}output.weight`),
      w1: await lora(`${a}w1`),
      a1: await lora(`${a}a1`),
      g1: await lora(`${a}g1`),
      v1: first ? null : await lora(`${a}v1`),
      w2: await lora(`${a}w2`),
      a2: await lora(`${a}a2`),
      g2: await lora(`${a}g2`),
      v2: first ? null : await lora(`${a}v2`),
      prep: stack([vals(`${a}w0`), vals(`${a}a0`), first ? new Float32Array(C) : vals(`${a}v0`), vals(`${a}k_k`), vals(`${a}k_a`)]),
      post: stack([vals(`${a}r_k`), vals(`${a}ln_x.weight`), vals(`${a}ln_x.bias`)]),
      ffnMix: stack([vals(`${p}ffn.x_k`)]),
      ffnK: await linear(`${p}ffn.key.weight`),
      ffnV: await linear(`${p}ffn.value.weight`),
    };
    for (const m of [layer.w1, layer.a1, layer.g1, layer.v1]) if (m) maxLora = Math.max(maxLora, m.panels * 8);
    layers.push(layer);
  }
  // RWKV-7a: the tables stay as stored (f16 unless f32 weights, like the embedding); see shaders/rwkv7a_gate.wgsl
  // for why SE is not merged at load.
  let deepEmbed: CpuDeepEmbedLayer[] | undefined;
  if (deepEmbedded) {
    deepEmbed = [];
    for (let l = 0; l < info.nLayer; l++) {
      const f = `blocks.${l}.ffn.`;
      const table = w.tensor(`${f}s_emb.weight`);
      const [s1, s2, s0] = [vals(`${f}s1`), vals(`${f}s2`), vals(`${f}s0`)];
      const gate = new Float32Array(s1.length + s2.length + s0.length);
      gate.set(s1);
      gate.set(s2, s1.length);
      gate.set(s0, s1.length + s2.length);
      deepEmbed.push({ table: w.place(wide ? toF32(table) : toF16Bits(table)), gate: w.place(gate), sx: await linear(`${f}s_emb_x.weight`) });
    }
  }
  const dea = info.version === 'v7b' ? await planDeaLayers(w, info, wide) : undefined;
  return {
    weights: { ...common, deepEmbed, dea, layers, maxLora, bytes: w.bytes, hasInt8: w.hasInt8, hasI16: w.hasI16 },
    write: (memory) => w.write(memory),
  };
}
