// safetensors: [u64 LE header length][JSON header][tensor data]. The header maps each tensor name
// to {dtype, shape, data_offsets: [begin, end]} relative to the start of the data section, plus an
// optional "__metadata__" string map. Everything in the header is validated before any tensor is
// read, so a damaged file fails with a message naming what is wrong instead of garbage weights. The
// header's size and its number of JSON arrays/objects are bounded before it is read and parsed, so a
// crafted header cannot make JSON.parse build an unbounded structure.

import * as fs from 'fs';
import * as path from 'path';
import type { Checkpoint, DType, RawTensor } from '../types';
import { bytesPerElement, numElements } from './dtype';
import { readAll, type CheckpointReader, type TensorInfo } from './checkpoint-reader';
import { FileReader } from './file-reader';
import { clip, LOADER_LIMITS, preview } from './limits';

const FROM_ST_DTYPE: Record<string, DType> = { F32: 'f32', F16: 'f16', BF16: 'bf16', I32: 'i32' };
const TO_ST_DTYPE: Record<DType, string> = { f32: 'F32', f16: 'F16', bf16: 'BF16', i32: 'I32' };

export interface SafetensorsEntry {
  name: string;
  dtype: DType;
  shape: number[];
  /** Byte range inside the data section. */
  begin: number;
  end: number;
}

export interface SafetensorsHeader {
  /** Absolute file offset of the data section (8 + header length). */
  dataStart: number;
  entries: SafetensorsEntry[];
  metadata: Record<string, string>;
}

function isNonNegInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/**
 * Validate a parsed header against the data section length. Exported separately from file reading
 * so the rules are testable on their own.
 */
export function validateSafetensorsHeader(json: unknown, dataLength: number, where: string): Omit<SafetensorsHeader, 'dataStart'> {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new Error(`${where}: safetensors header is not a JSON object`);
  }
  const metadata: Record<string, string> = {};
  const entries: SafetensorsEntry[] = [];
  const declared = Object.keys(json).filter((k) => k !== '__metadata__').length;
  if (declared > LOADER_LIMITS.maxTensors) {
    throw new Error(`${where}: safetensors header declares ${declared} tensors; at most ${LOADER_LIMITS.maxTensors} are supported`);
  }
  for (const [name, value] of Object.entries(json as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new Error(`${where}: safetensors __metadata__ is not an object`);
      }
      const count = Object.keys(value).length;
      if (count > LOADER_LIMITS.safetensors.maxMetadataEntries) {
        throw new Error(`${where}: safetensors __metadata__ has ${count} entries; at most ${LOADER_LIMITS.safetensors.maxMetadataEntries} are supported`);
      }
      for (const [k, v] of Object.entries(value)) {
        if (typeof v !== 'string') throw new Error(`${where}: safetensors __metadata__.${clip(k)} is not a string`);
        metadata[k] = v;
      }
      continue;
    }
    const bad = (why: string) => new Error(`${where}: safetensors tensor "${clip(name)}": ${why}`);
    if (Buffer.byteLength(name) > LOADER_LIMITS.maxNameBytes) throw bad(`name is longer than ${LOADER_LIMITS.maxNameBytes} bytes`);
    if (typeof value !== 'object' || value === null) throw bad('entry is not an object');
    const { dtype, shape, data_offsets: offsets } = value as Record<string, unknown>;
    if (typeof dtype !== 'string') throw bad('missing dtype');
    const dt = Object.prototype.hasOwnProperty.call(FROM_ST_DTYPE, dtype) ? FROM_ST_DTYPE[dtype] : undefined;
    if (!dt) throw bad(`unsupported dtype ${clip(dtype, 40)} (supported: ${Object.keys(FROM_ST_DTYPE).join(', ')})`);
    if (!Array.isArray(shape) || !shape.every(isNonNegInt)) throw bad(`shape ${preview(shape)} is not a list of non-negative integers`);
    if (shape.length > LOADER_LIMITS.maxRank) throw bad(`shape has ${shape.length} dimensions; at most ${LOADER_LIMITS.maxRank} are supported`);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isNonNegInt) || offsets[0] > offsets[1]) {
      throw bad(`data_offsets ${preview(offsets)} is not [begin, end] with 0 <= begin <= end`);
    }
    const [begin, end] = offsets as number[];
    if (!shape.includes(0) && shape.reduce((n: number, d: number) => n * d, 1) > Number.MAX_SAFE_INTEGER) {
      throw bad(`shape [${shape.join(', ')}] has more than 2^53 elements`);
    }
    const expected = numElements(shape) * bytesPerElement(dt);
    if (end - begin !== expected) {
      throw bad(`data_offsets cover ${end - begin} bytes but shape [${shape.join(', ')}] of ${dtype} needs ${expected}`);
    }
    if (end > dataLength) {
      throw bad(`data ends at byte ${end} of the data section but the file has only ${dataLength} data bytes (file truncated?)`);
    }
    entries.push({ name, dtype: dt, shape: shape as number[], begin, end });
  }
  const byStart = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  for (let i = 1; i < byStart.length; i++) {
    const prev = byStart[i - 1];
    const cur = byStart[i];
    if (cur.begin < prev.end) {
      throw new Error(`${where}: safetensors tensors "${clip(prev.name)}" and "${clip(cur.name)}" overlap (bytes ${cur.begin}..${prev.end})`);
    }
  }
  return { entries, metadata };
}

export function readSafetensorsHeader(file: FileReader): SafetensorsHeader {
  if (file.size < 8) throw new Error(`${file.path}: file is too short (${file.size} bytes) to be safetensors`);
  const lenBytes = file.read(0, 8, 'header length');
  const headerLen = Number(new DataView(lenBytes.buffer, lenBytes.byteOffset, 8).getBigUint64(0, true));
  const limits = LOADER_LIMITS.safetensors;
  if (headerLen > limits.maxHeaderBytes) {
    throw new Error(`${file.path}: safetensors header length ${headerLen} is implausible: larger than the ${limits.maxHeaderBytes} bytes allowed (corrupt header?)`);
  }
  if (8 + headerLen > file.size) {
    throw new Error(`${file.path}: safetensors header length ${headerLen} exceeds the file size ${file.size} (file truncated?)`);
  }
  const headerBytes = file.read(8, headerLen, 'header');
  // '[', '{' and ',' bound the values JSON.parse will make. Counted over the raw bytes (inside strings
  // too): an over-estimate is harmless at this bound.
  let items = 0;
  for (let i = 0; i < headerBytes.length; i++) {
    const b = headerBytes[i];
    if (b === 0x5b || b === 0x7b || b === 0x2c) items++;
  }
  if (items > limits.maxHeaderItems) {
    throw new Error(`${file.path}: safetensors header has more than ${limits.maxHeaderItems} JSON arrays, objects and items`);
  }
  const headerText = Buffer.from(headerBytes).toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(headerText);
  } catch (e) {
    throw new Error(`${file.path}: safetensors header is not valid JSON (${(e as Error).message})`);
  }
  const dataStart = 8 + headerLen;
  return { dataStart, ...validateSafetensorsHeader(json, file.size - dataStart, file.path) };
}

/** Open a .st file: the header is read and validated now, tensor bytes on demand. */
export function openSafetensors(filePath: string): CheckpointReader {
  const file = new FileReader(filePath);
  let header: SafetensorsHeader;
  try {
    header = readSafetensorsHeader(file);
  } catch (e) {
    file.close();
    throw e;
  }
  const entries = new Map(header.entries.map((e) => [e.name, e]));
  const tensors = new Map<string, TensorInfo>(header.entries.map((e) => [e.name, { name: e.name, dtype: e.dtype, shape: e.shape }]));
  let closed = false;
  return {
    format: 'safetensors',
    path: filePath,
    tensors,
    metadata: header.metadata,
    read(name: string): RawTensor {
      const e = entries.get(name);
      if (!e) throw new Error(`${filePath}: no tensor named ${name}`);
      if (closed) throw new Error(`${filePath}: checkpoint reader is closed`);
      const bytes = file.read(header.dataStart + e.begin, e.end - e.begin, `tensor ${e.name}`);
      return { name: e.name, dtype: e.dtype, shape: [...e.shape], bytes };
    },
    close() {
      if (!closed) file.close();
      closed = true;
    },
  };
}

/** Read a whole .st file, one tensor per buffer (never the whole file at once). */
export function readSafetensors(filePath: string): Checkpoint {
  return readAll(openSafetensors(filePath));
}

/** Write `data` fully at the current position of fd (writeSync may write less than asked). */
function writeAll(fd: number, data: Uint8Array): void {
  const CHUNK = 1 << 30;
  let done = 0;
  while (done < data.byteLength) {
    done += fs.writeSync(fd, data, done, Math.min(CHUNK, data.byteLength - done));
  }
}

/**
 * Write tensors (in the given order) as safetensors. The header is space-padded to a multiple of 8
 * so that data offsets stay aligned, and the file is written under a temporary name and renamed so
 * a crash never leaves a half-written model at `filePath`.
 */
export function writeSafetensors(
  filePath: string,
  tensors: Iterable<RawTensor> | Map<string, RawTensor>,
  metadata: Record<string, string> = {},
): void {
  const list = tensors instanceof Map ? [...tensors.values()] : [...tensors];
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const t of list) {
    if (t.name === '__metadata__' || Object.prototype.hasOwnProperty.call(header, t.name)) {
      throw new Error(`writeSafetensors: duplicate or reserved tensor name "${t.name}"`);
    }
    const expected = numElements(t.shape) * bytesPerElement(t.dtype);
    if (t.bytes.byteLength !== expected) {
      throw new Error(`writeSafetensors: tensor "${t.name}" has ${t.bytes.byteLength} bytes, shape [${t.shape.join(', ')}] of ${t.dtype} needs ${expected}`);
    }
    header[t.name] = { dtype: TO_ST_DTYPE[t.dtype], shape: t.shape, data_offsets: [offset, offset + expected] };
    offset += expected;
  }
  let json = Buffer.from(JSON.stringify(header), 'utf8');
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded !== json.length) json = Buffer.concat([json, Buffer.alloc(padded - json.length, 0x20)]);
  const lenBytes = Buffer.alloc(8);
  lenBytes.writeBigUInt64LE(BigInt(json.length));

  const tmp = path.join(path.dirname(filePath), `.${path.basename(filePath)}.${process.pid}.tmp`);
  const fd = fs.openSync(tmp, 'w');
  try {
    writeAll(fd, lenBytes);
    writeAll(fd, json);
    for (const t of list) writeAll(fd, t.bytes);
    fs.closeSync(fd);
    fs.renameSync(tmp, filePath);
  } catch (e) {
    try {
      fs.closeSync(fd);
    } catch {
      /* already closed */
    }
    fs.rmSync(tmp, { force: true });
    throw e;
  }
}
