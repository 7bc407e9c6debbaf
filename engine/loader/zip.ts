// A small random-access ZIP reader over the central directory, with ZIP64. PyTorch's torch.save
// writes an uncompressed ZIP with one entry per storage; official RWKV checkpoints are 3-15 GB, so
// entries are located through the central directory and read one by one with positional reads.
// (npm zip libraries are stream/async oriented or cap at 4 GB; this needs neither.)

import * as zlib from 'zlib';
import { FileReader } from './file-reader';

export interface ZipEntry {
  name: string;
  /** 0 = stored, 8 = deflate. */
  method: number;
  compressedSize: number;
  size: number;
  crc32: number;
  localHeaderOffset: number;
}

const SIG_EOCD = 0x06054b50;
const SIG_ZIP64_LOCATOR = 0x07064b50;
const SIG_ZIP64_EOCD = 0x06064b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_LOCAL = 0x04034b50;
const EOCD_SIZE = 22;
const MAX_COMMENT = 0xffff;

function u64(view: DataView, at: number): number {
  const v = view.getBigUint64(at, true);
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`ZIP field value ${v} is too large`);
  return Number(v);
}

function viewOf(b: Uint8Array): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

export class ZipReader {
  readonly entries = new Map<string, ZipEntry>();

  constructor(private readonly file: FileReader) {
    const { count, cdOffset, cdSize } = this.findCentralDirectory();
    if (cdOffset + cdSize > file.size) throw this.corrupt('central directory lies beyond the end of the file');
    const cd = file.read(cdOffset, cdSize, 'ZIP central directory');
    const view = viewOf(cd);
    let p = 0;
    for (let i = 0; i < count; i++) {
      if (p + 46 > cd.length || view.getUint32(p, true) !== SIG_CENTRAL) throw this.corrupt(`central directory entry ${i} is damaged`);
      const method = view.getUint16(p + 10, true);
      const crc32 = view.getUint32(p + 16, true);
      let compressedSize = view.getUint32(p + 20, true);
      let size = view.getUint32(p + 24, true);
      const nameLen = view.getUint16(p + 28, true);
      const extraLen = view.getUint16(p + 30, true);
      const commentLen = view.getUint16(p + 32, true);
      let localHeaderOffset = view.getUint32(p + 42, true);
      if (p + 46 + nameLen + extraLen + commentLen > cd.length) throw this.corrupt(`central directory entry ${i} is damaged`);
      const name = Buffer.from(cd.subarray(p + 46, p + 46 + nameLen)).toString('utf8');
      // ZIP64 extra field (id 1) holds, in this order, only the fields whose 32-bit slot is 0xFFFFFFFF.
      let q = p + 46 + nameLen;
      const extraEnd = q + extraLen;
      while (q + 4 <= extraEnd) {
        const id = view.getUint16(q, true);
        const len = view.getUint16(q + 2, true);
        if (id === 1) {
          let r = q + 4;
          const need = (cond: boolean) => {
            if (!cond) return false;
            if (r + 8 > q + 4 + len) throw this.corrupt(`ZIP64 extra field of ${name} is too short`);
            return true;
          };
          if (need(size === 0xffffffff)) { size = u64(view, r); r += 8; }
          if (need(compressedSize === 0xffffffff)) { compressedSize = u64(view, r); r += 8; }
          if (need(localHeaderOffset === 0xffffffff)) { localHeaderOffset = u64(view, r); r += 8; }
        }
        q += 4 + len;
      }
      this.entries.set(name, { name, method, compressedSize, size, crc32, localHeaderOffset });
      p += 46 + nameLen + extraLen + commentLen;
    }
  }

  private corrupt(why: string): Error {
    return new Error(`${this.file.path}: corrupt ZIP file: ${why}`);
  }

  private findCentralDirectory(): { count: number; cdOffset: number; cdSize: number } {
    const size = this.file.size;
    if (size < EOCD_SIZE) throw new Error(`${this.file.path}: file is too short (${size} bytes) to be a ZIP archive (truncated?)`);
    // The end-of-central-directory record sits in the last 22 bytes plus an optional comment.
    const tailLen = Math.min(size, EOCD_SIZE + MAX_COMMENT);
    const tail = this.file.read(size - tailLen, tailLen, 'ZIP end records');
    const view = viewOf(tail);
    let at = -1;
    for (let i = tailLen - EOCD_SIZE; i >= 0; i--) {
      if (view.getUint32(i, true) === SIG_EOCD && i + EOCD_SIZE + view.getUint16(i + 20, true) === tailLen) {
        at = i;
        break;
      }
    }
    if (at < 0) {
      throw new Error(`${this.file.path}: ZIP end-of-central-directory record not found (file truncated or not a ZIP archive)`);
    }
    let count = view.getUint16(at + 10, true);
    let cdSize = view.getUint32(at + 12, true);
    let cdOffset = view.getUint32(at + 16, true);
    const locAt = at - 20;
    if (locAt >= 0 && view.getUint32(locAt, true) === SIG_ZIP64_LOCATOR) {
      const z64Offset = u64(view, locAt + 8);
      const rec = viewOf(this.file.read(z64Offset, 56, 'ZIP64 end-of-central-directory record'));
      if (rec.getUint32(0, true) !== SIG_ZIP64_EOCD) throw this.corrupt('ZIP64 end-of-central-directory record not found');
      count = u64(rec, 32);
      cdSize = u64(rec, 40);
      cdOffset = u64(rec, 48);
    } else if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
      throw this.corrupt('ZIP64 archive without a ZIP64 locator');
    }
    return { count, cdOffset, cdSize };
  }

  /** Absolute file offset of an entry's data (after its local header). */
  dataOffset(entry: ZipEntry): number {
    const local = viewOf(this.file.read(entry.localHeaderOffset, 30, `local header of ${entry.name}`));
    if (local.getUint32(0, true) !== SIG_LOCAL) throw this.corrupt(`local header of ${entry.name} is damaged`);
    const start = entry.localHeaderOffset + 30 + local.getUint16(26, true) + local.getUint16(28, true);
    if (start + entry.compressedSize > this.file.size) {
      throw new Error(`${this.file.path}: file is truncated: entry ${entry.name} ends beyond the end of the file`);
    }
    return start;
  }

  /** The entry's uncompressed bytes in a buffer of their own. */
  read(entry: ZipEntry, opts: { verifyCrc?: boolean } = {}): Uint8Array {
    const start = this.dataOffset(entry);
    let data: Uint8Array;
    if (entry.method === 0) {
      if (entry.compressedSize !== entry.size) throw this.corrupt(`stored entry ${entry.name} has mismatched sizes`);
      data = this.file.read(start, entry.size, `ZIP entry ${entry.name}`);
    } else if (entry.method === 8) {
      // torch never compresses, but an archive re-zipped by a tool may deflate small entries.
      const raw = this.file.read(start, entry.compressedSize, `ZIP entry ${entry.name}`);
      try {
        data = new Uint8Array(zlib.inflateRawSync(raw));
      } catch (e) {
        throw this.corrupt(`entry ${entry.name} does not inflate (${(e as Error).message})`);
      }
      if (data.length !== entry.size) throw this.corrupt(`entry ${entry.name} inflates to ${data.length} bytes, expected ${entry.size}`);
    } else {
      throw new Error(`${this.file.path}: ZIP entry ${entry.name} uses unsupported compression method ${entry.method}`);
    }
    if (opts.verifyCrc && typeof (zlib as { crc32?: unknown }).crc32 === 'function') {
      const crc = (zlib as unknown as { crc32(d: Uint8Array): number }).crc32(data) >>> 0;
      if (crc !== entry.crc32) throw this.corrupt(`CRC mismatch in entry ${entry.name}`);
    }
    return data;
  }
}
