// What the loader accepts at most, in one place, and bounded previews of file-supplied values for error
// messages. Every count, size and length a model file declares is checked against these (and against the
// file's own size) before anything is allocated for it, so a crafted file is refused quickly with a short
// message and bounded memory. The bounds sit ten or more times above what real RWKV checkpoints need: a
// 14B model has ~2,000 tensors, a pickle of ~200 KB with ~50K values (~24 per tensor), a safetensors
// header of ~200 KB with ~16K JSON items.

const MiB = 1024 * 1024;

export const LOADER_LIMITS = {
  /** Dimensions of one tensor (RWKV tensors have at most 3). */
  maxRank: 8,
  /** Tensors in one checkpoint (each read is a buffer of its own, so a file of many tiny ones is costly). */
  maxTensors: 32_768,
  /** Bytes of one tensor name (official names are < 40). */
  maxNameBytes: 1024,
  pickle: {
    /** Size of data.pkl. */
    maxBytes: 16 * MiB,
    /** Values pushed on the unpickler's stack, shared references included: bounds objects made. */
    maxValues: 500_000,
    /** Items put into lists, tuples and dicts, in total. */
    maxElements: 1_000_000,
    /** Memo entries. */
    maxMemo: 500_000,
    /** Nesting of containers (a state dict is ~4 deep). */
    maxDepth: 64,
  },
  zip: {
    maxEntries: 65_536,
    maxCentralDirectoryBytes: 64 * MiB,
    /** Largest deflated entry that is inflated at all (only small metadata entries may be compressed). */
    maxInflatedBytes: 16 * MiB,
  },
  safetensors: {
    maxHeaderBytes: 16 * MiB,
    /** JSON arrays, objects and commas in the header (about eight per tensor in real files). */
    maxHeaderItems: 400_000,
    /** Entries of __metadata__ (real files have a handful). */
    maxMetadataEntries: 1024,
  },
} as const;

/** A file-supplied string shortened for a message. */
export function clip(s: string, max = 120): string {
  return s.length <= max ? s : `${s.slice(0, max)}… (${s.length} characters)`;
}

/**
 * A short, bounded rendering of an unpickled or parsed value for an error message. Never walks more than
 * a few levels or items, so shared (exponentially large when expanded) or cyclic structures are safe.
 */
export function preview(value: unknown, maxChars = 120): string {
  let budget = maxChars;
  const walk = (v: unknown, depth: number): string => {
    if (budget <= 0) return '…';
    let s: string;
    if (v === null || v === undefined || typeof v === 'boolean' || typeof v === 'number' || typeof v === 'bigint') s = String(v);
    else if (typeof v === 'string') s = JSON.stringify(clip(v, 40));
    else if (v instanceof Uint8Array) s = `<${v.length} bytes>`;
    else if (Array.isArray(v) || v instanceof Map) {
      const total = Array.isArray(v) ? v.length : v.size;
      const items: unknown[] = [];
      for (const item of Array.isArray(v) ? v : v.entries()) {
        if (items.length === 8) break;
        items.push(item);
      }
      const [open, close] = Array.isArray(v) ? (Object.isFrozen(v) ? ['(', ')'] : ['[', ']']) : ['{', '}'];
      if (depth >= 3) s = `${open}…${total ? ` ${total} items` : ''}${close}`;
      else {
        const shown: string[] = [];
        for (const item of items) {
          if (budget <= 0) break;
          shown.push(v instanceof Map ? `${walk((item as unknown[])[0], depth + 1)}: ${walk((item as unknown[])[1], depth + 1)}` : walk(item, depth + 1));
        }
        s = `${open}${shown.join(', ')}${total > shown.length ? ', …' : ''}${close}`;
      }
    } else if (typeof v === 'object') s = `<${(v as object).constructor?.name ?? 'object'}>`;
    else s = `<${typeof v}>`;
    budget -= s.length;
    return s;
  };
  return clip(walk(value, 0), maxChars + 20);
}
