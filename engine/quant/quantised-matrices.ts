// Which tensors precision 'int8' and 'nf4' quantise: the large matrices, read once per token and holding almost
// all of a model's bytes — the time mix's receptance, key, value, gate and output, the channel mix's key,
// receptance and value, and the head. LoRA-like matrices (RWKV-7's w/a/v/g stages, RWKV-6's token-shift and
// decay LoRAs), the embedding (a table lookup: one row read a token) and vectors stay f16 (f32 for vectors).

export const QUANTISED_MATRIX = /^(?:blocks\.\d+\.(?:att\.(?:receptance|key|value|gate|output)|ffn\.(?:key|receptance|value))|head)\.weight$/;

export function isQuantisedMatrix(name: string): boolean {
  return QUANTISED_MATRIX.test(name);
}
