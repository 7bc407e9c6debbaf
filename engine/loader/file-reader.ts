// Positional reads from an open file into fresh, exclusively owned buffers. Loaders read one tensor
// at a time this way so that multi-GB checkpoints never need one buffer for the whole file, and
// each tensor's bytes start at offset 0 of their own ArrayBuffer (aligned for any typed view).

import * as fs from 'fs';

/** fs.readSync takes at most 2^31-1 bytes per call. */
const MAX_READ = 1 << 30;

export class FileReader {
  readonly size: number;
  private fd: number;

  constructor(readonly path: string) {
    this.fd = fs.openSync(path, 'r');
    try {
      this.size = fs.fstatSync(this.fd).size;
    } catch (e) {
      fs.closeSync(this.fd);
      throw e;
    }
  }

  /** Exactly `length` bytes at `position`; throws a "truncated" error if the file ends first. */
  read(position: number, length: number, what: string): Uint8Array {
    if (position < 0 || length < 0 || position + length > this.size) {
      throw new Error(
        `${this.path}: file is truncated or corrupt: ${what} needs bytes ${position}..${position + length} ` +
          `but the file has ${this.size} bytes`,
      );
    }
    // allocUnsafeSlow: no zero-fill (we overwrite every byte) and never a slice of the shared pool.
    const buf = Buffer.allocUnsafeSlow(length);
    let done = 0;
    while (done < length) {
      const n = fs.readSync(this.fd, buf, done, Math.min(MAX_READ, length - done), position + done);
      if (n === 0) throw new Error(`${this.path}: unexpected end of file while reading ${what}`);
      done += n;
    }
    return new Uint8Array(buf.buffer, buf.byteOffset, length);
  }

  close(): void {
    if (this.fd >= 0) {
      fs.closeSync(this.fd);
      this.fd = -1;
    }
  }
}

/** Run `body` with an open reader and always close it. */
export function withFile<T>(path: string, body: (r: FileReader) => T): T {
  const reader = new FileReader(path);
  try {
    return body(reader);
  } finally {
    reader.close();
  }
}
