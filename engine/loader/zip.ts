// A small random-access ZIP reader over the central directory, with ZIP64. PyTorch's torch.save
// writes an uncompressed ZIP with one entry per storage; official RWKV checkpoints are 3-15 GB, so
// entries are located through the central directory and read one by one with positional reads.
// (npm zip libraries are stream/async oriented or cap at 4 GB; this needs neither.)
//
// The archive's own numbers are distrusted: the entry count and central-directory size are bounded,
// every local header is read at open and must agree with its central-directory entry, and entries must
// lie inside the file, before the central directory and without overlapping one another — so the bytes
// all entries declare add up to at most the file size. Compressed entries are inflated only up to a
// small bound (torch stores everything; see ZipReader.read).

import * as zlib from 'zlib';
import { FileReader } from './file-reader';
import { clip, LOADER_LIMITS } from './limits';

export interface ZipEntry {
  name: string;
  /** 0 = stored, 8 = deflate. */
  method: number;
  compressedSize: number;
  size: number;
  crc32: number;
  localHeaderOffset: number;
  /** Absolute file offset of the entry's data (after its local header). */
  dataOffset: number;
}

const SIG_EOCD = 0x06054b50;
const SIG_ZIP64_LOCATOR = 0x07064b50;
const SIG_ZIP64_EOCD = 0x06064b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_LOCAL = 0x04034b50;
const EOCD_SIZE = 22;
const CENTRAL_SIZE = 46;
const LOCAL_SIZE = 30;
/** General-purpose flag bit 3: sizes and CRC follow the data (torch sets it; local fields are then 0). */
const FLAG_DATA_DESCRIPTOR = 0x8;
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
    const limits = LOADER_LIMITS.zip;
    if (count > limits.maxEntries) throw this.corrupt(`ZIP archive has ${count} entries; at most ${limits.maxEntries} are allowed`);
    if (cdSize > limits.maxCentralDirectoryBytes) {
      throw this.corrupt(`central directory of ${cdSize} bytes is larger than the ${limits.maxCentralDirectoryBytes} allowed`);
    }
    if (count * CENTRAL_SIZE > cdSize) throw this.corrupt(`${count} entries cannot fit in a central directory of ${cdSize} bytes`);
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
      if (this.entries.has(name)) throw this.corrupt(`entry ${clip(name)} appears twice`);
      this.entries.set(name, { name, method, compressedSize, size, crc32, localHeaderOffset, dataOffset: -1 });
      p += 46 + nameLen + extraLen + commentLen;
    }
    this.checkLayout(cdOffset);
  }

  /**
   * Read every local header (a few bytes each) and check that it matches its central-directory entry
   * and that the entries' [header, data end) ranges lie before the central directory without overlapping.
   */
  private checkLayout(cdOffset: number): void {
    const byOffset = [...this.entries.values()].sort((a, b) => a.localHeaderOffset - b.localHeaderOffset);
    for (let i = 1; i < byOffset.length; i++) {
      // Same start: the common "many names, one copy of the data" bomb, named before reading anything.
      if (byOffset[i].localHeaderOffset === byOffset[i - 1].localHeaderOffset) this.overlap(byOffset[i - 1], byOffset[i]);
    }
    let prev: ZipEntry | undefined;
    for (const e of byOffset) {
      if (prev && e.localHeaderOffset < prev.dataOffset + prev.compressedSize) this.overlap(prev, e);
      e.dataOffset = this.readLocalHeader(e);
      if (e.dataOffset + e.compressedSize > cdOffset) {
        if (e.dataOffset + e.compressedSize > this.file.size) {
          throw new Error(`${this.file.path}: file is truncated: entry ${clip(e.name)} ends beyond the end of the file`);
        }
        throw this.corrupt(`entry ${clip(e.name)} runs into the central directory`);
      }
      prev = e;
    }
  }

  private overlap(a: ZipEntry, b: ZipEntry): never {
    throw this.corrupt(`ZIP entries ${clip(a.name)} and ${clip(b.name)} overlap (at bytes ${a.localHeaderOffset} and ${b.localHeaderOffset})`);
  }

  /** Check an entry's local header against its central-directory entry; returns where its data starts. */
  private readLocalHeader(e: ZipEntry): number {
    if (e.localHeaderOffset + LOCAL_SIZE > this.file.size) {
      throw new Error(`${this.file.path}: file is truncated: local header of ${clip(e.name)} lies beyond the end of the file`);
    }
    const head = this.file.read(e.localHeaderOffset, LOCAL_SIZE, `local header of ${clip(e.name)}`);
    const local = viewOf(head);
    if (local.getUint32(0, true) !== SIG_LOCAL) throw this.corrupt(`local header of ${clip(e.name)} is damaged`);
    const flags = local.getUint16(6, true);
    const method = local.getUint16(8, true);
    const nameLen = local.getUint16(26, true);
    const extraLen = local.getUint16(28, true);
    const mismatch = (what: string) => this.corrupt(`local header of ${clip(e.name)} disagrees with the central directory (${what})`);
    if (method !== e.method) throw mismatch(`compression method ${method} vs ${e.method}`);
    if (e.localHeaderOffset + LOCAL_SIZE + nameLen > this.file.size) {
      throw new Error(`${this.file.path}: file is truncated: local header of ${clip(e.name)} lies beyond the end of the file`);
    }
    const localName = Buffer.from(this.file.read(e.localHeaderOffset + LOCAL_SIZE, nameLen, `local header of ${clip(e.name)}`)).toString('utf8');
    if (localName !== e.name) throw mismatch(`name ${clip(localName)}`);
    if (!(flags & FLAG_DATA_DESCRIPTOR)) {
      // 0xFFFFFFFF defers to the local ZIP64 extra field; the central directory's values were checked.
      const compressed = local.getUint32(18, true);
      const size = local.getUint32(22, true);
      if (compressed !== 0xffffffff && compressed !== e.compressedSize) throw mismatch(`compressed size ${compressed} vs ${e.compressedSize}`);
      if (size !== 0xffffffff && size !== e.size) throw mismatch(`size ${size} vs ${e.size}`);
    }
    return e.localHeaderOffset + LOCAL_SIZE + nameLen + extraLen;
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

  /**
   * The entry's uncompressed bytes in a buffer of their own. A deflated entry is inflated only when it
   * declares at most `maxInflatedBytes` and never past what it declares: torch never compresses, but an
   * archive re-zipped by a tool may deflate small metadata entries.
   */
  read(entry: ZipEntry, opts: { verifyCrc?: boolean; maxInflatedBytes?: number } = {}): Uint8Array {
    const start = entry.dataOffset;
    const name = clip(entry.name);
    let data: Uint8Array;
    if (entry.method === 0) {
      if (entry.compressedSize !== entry.size) throw this.corrupt(`stored entry ${name} has mismatched sizes`);
      data = this.file.read(start, entry.size, `ZIP entry ${name}`);
    } else if (entry.method === 8) {
      const max = opts.maxInflatedBytes ?? LOADER_LIMITS.zip.maxInflatedBytes;
      if (entry.size > max) {
        throw this.corrupt(`compressed entry ${name} declares ${entry.size} bytes; at most ${max} are inflated (tensor data must be stored uncompressed)`);
      }
      const raw = this.file.read(start, entry.compressedSize, `ZIP entry ${name}`);
      try {
        // One byte more than declared is enough to tell "inflates to more than declared" apart.
        data = new Uint8Array(zlib.inflateRawSync(raw, { maxOutputLength: entry.size + 1 }));
      } catch (e) {
        const why = (e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' ? `more than the declared ${entry.size} bytes` : (e as Error).message;
        throw this.corrupt(`entry ${name} does not inflate (${why})`);
      }
      if (data.length !== entry.size) throw this.corrupt(`entry ${name} inflates to ${data.length} bytes, expected ${entry.size}`);
    } else {
      throw new Error(`${this.file.path}: ZIP entry ${name} uses unsupported compression method ${entry.method}`);
    }
    if (opts.verifyCrc && typeof (zlib as { crc32?: unknown }).crc32 === 'function') {
      const crc = (zlib as unknown as { crc32(d: Uint8Array): number }).crc32(data) >>> 0;
      if (crc !== entry.crc32) throw this.corrupt(`CRC mismatch in entry ${name}`);
    }
    return data;
  }
}
