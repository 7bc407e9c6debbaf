// The weight precisions a model can be loaded in (issue #15): 'f16' (default) and 'f32' store every matrix as
// floats; 'int8' (per output row, f16 scales) and 'nf4' (64-weight blocks, f16 absmax) quantise the large
// matrices at load (engine/quant/). The GPU backend runs all four, the CPU backend all but nf4.

export const PRECISIONS = ['f16', 'f32', 'int8', 'nf4'] as const;

export type Precision = (typeof PRECISIONS)[number];

export function isPrecision(v: unknown): v is Precision {
  return typeof v === 'string' && (PRECISIONS as readonly string[]).includes(v);
}

/** The allowed values as a message lists them: "'f16', 'f32', 'int8' or 'nf4'". */
export function precisionList(quote = "'"): string {
  const q = PRECISIONS.map((p) => `${quote}${p}${quote}`);
  return `${q.slice(0, -1).join(', ')} or ${q[q.length - 1]}`;
}

/** Why the CPU backend cannot run a precision; null when it can. */
export function cpuRefusal(p: Precision): string | null {
  return p === 'nf4' ? "precision 'nf4' runs on the GPU backend only (the CPU backend runs f16, f32 and int8)" : null;
}
