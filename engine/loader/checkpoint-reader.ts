// Streaming access to a checkpoint file: the tensor index (names, dtypes, shapes) is known as soon as
// the file is opened, and each tensor's bytes are read only when asked for. A runtime can then upload
// and drop one tensor at a time, so a 15 GB 7B checkpoint never has to sit in host memory at once.

import type { Checkpoint, DType, RawTensor } from '../types';

/** A tensor's description without its data. */
export interface TensorInfo {
  name: string;
  dtype: DType;
  shape: number[];
}

export interface CheckpointReader {
  readonly format: 'pth' | 'safetensors';
  readonly path: string;
  /** Every tensor, in file order. */
  readonly tensors: ReadonlyMap<string, TensorInfo>;
  readonly metadata: Record<string, string>;
  /** Read one tensor's bytes into a buffer of its own. Throws for unknown names or a closed reader. */
  read(name: string): RawTensor;
  /** Release the file handle; idempotent. */
  close(): void;
}

/** Read every tensor of an open reader (and close it). */
export function readAll(reader: CheckpointReader): Checkpoint {
  try {
    const tensors = new Map<string, RawTensor>();
    for (const name of reader.tensors.keys()) tensors.set(name, reader.read(name));
    return { format: reader.format, tensors, metadata: reader.metadata };
  } finally {
    reader.close();
  }
}
