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

/** Whether a precision quantises matrices at load (and so takes `quantLayers`). */
export function isQuantised(p: Precision): p is 'int8' | 'nf4' {
  return p === 'int8' || p === 'nf4';
}

/**
 * How a model's weights are stored: the precision and, for 'int8' and 'nf4', how many layers counting from the
 * first it quantises (ai00's `quant`, issue #15's "first N layers"): the later layers' matrices stay f16, the
 * embedding and head are as the precision keeps them whatever N is. 0 = every layer.
 */
export interface WeightStorage {
  precision: Precision;
  quantLayers: number;
}

/**
 * Checks `quantLayers` against the precision and, once the model is known, its layer count; the error names
 * the field. Undefined is 0.
 */
export function checkQuantLayers(quantLayers: unknown, precision: Precision, nLayer?: number): number {
  if (quantLayers === undefined) return 0;
  const max = nLayer ?? Number.MAX_SAFE_INTEGER;
  if (typeof quantLayers !== 'number' || !Number.isInteger(quantLayers) || quantLayers < 0 || quantLayers > max) {
    const range = nLayer === undefined ? 'an integer >= 0' : `an integer in [0, ${nLayer}] (the model has ${nLayer} layers)`;
    throw new RangeError(`quantLayers (layers quantised, from the first; 0 = all) must be ${range}, got ${JSON.stringify(quantLayers)}`);
  }
  if (quantLayers > 0 && !isQuantised(precision)) {
    throw new RangeError(`quantLayers ${quantLayers} needs precision 'int8' or 'nf4' (it says how many layers they quantise); precision is '${precision}'`);
  }
  return quantLayers;
}

/** Whether layer `l` of a model stored so has its matrices quantised. */
export function layerIsQuantised(s: WeightStorage, l: number): boolean {
  return isQuantised(s.precision) && (s.quantLayers === 0 || l < s.quantLayers);
}

/** The kernel description's note on partly quantised models ('' when every layer is quantised or none). */
export function quantLayersNote(s: WeightStorage, nLayer: number): string {
  if (!isQuantised(s.precision) || s.quantLayers === 0 || s.quantLayers >= nLayer) return '';
  return ` (${s.precision} in layers 0-${s.quantLayers - 1} and the head, f16 in layers ${s.quantLayers}-${nLayer - 1})`;
}
