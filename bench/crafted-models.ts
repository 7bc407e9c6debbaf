// Hostile model files, one per attack class a tester used against the loader, and the byte-level
// builders that make them (a ZIP writer, a pickle writer, raw safetensors). The builders are written
// independently of engine/loader so a test can craft what the loader must refuse; the safety bench
// (bench/safety-loader.ts) and test/loader-hostile.test.ts share this one list.

import * as fs from 'fs';
import * as path from 'path';
import * as zlib from 'zlib';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import type { RawTensor } from '../engine/types';

// ---------------------------------------------------------------------------------------------
// ZIP

export interface ZipInput {
  name: string;
  /** The entry's bytes as stored in the archive (already compressed when method is 8). */
  data: Uint8Array;
  /** 0 stored (default), 8 deflate. */
  method?: number;
  /** Declared uncompressed size (default data.length). */
  size?: number;
  /** CRC-32 of the uncompressed bytes (default: of data when stored, else 0). */
  crc?: number;
  /** A central-directory entry that points at the local header and data of the named earlier entry. */
  aliasOf?: string;
}

const crc32 = (d: Uint8Array) => (zlib as unknown as { crc32(d: Uint8Array): number }).crc32(d) >>> 0;

/** A ZIP archive (stored entries unless told otherwise), optionally with every ZIP64 structure forced on. */
export function buildZip(entries: ZipInput[], zip64 = false): Buffer {
  // Laid out first, then written into one buffer: archives of 100K entries stay fast to build.
  const placed = new Map<string, { offset: number; crc: number }>();
  const rows = entries.map((e) => ({ e, name: Buffer.from(e.name), method: e.method ?? 0, size: e.size ?? e.data.length, at: 0, crc: 0, local: false }));
  let offset = 0;
  const localExtra = zip64 ? 20 : 0;
  const centralExtra = zip64 ? 28 : 0;
  for (const r of rows) {
    const alias = r.e.aliasOf === undefined ? undefined : placed.get(r.e.aliasOf);
    if (r.e.aliasOf !== undefined && !alias) throw new Error(`buildZip: alias of unknown entry ${r.e.aliasOf}`);
    r.crc = alias ? alias.crc : r.e.crc ?? (r.method === 0 ? crc32(r.e.data) : 0);
    r.at = alias ? alias.offset : offset;
    r.local = !alias;
    if (!alias) {
      placed.set(r.e.name, { offset, crc: r.crc });
      offset += 30 + r.name.length + localExtra + r.e.data.length;
    }
  }
  const cdSize = rows.reduce((n, r) => n + 46 + r.name.length + centralExtra, 0);
  const out = Buffer.alloc(offset + cdSize + (zip64 ? 76 : 0) + 22);
  const version = zip64 ? 45 : 20;
  let p = 0;
  for (const r of rows) {
    if (!r.local) continue;
    out.writeUInt32LE(0x04034b50, p);
    out.writeUInt16LE(version, p + 4);
    out.writeUInt16LE(r.method, p + 8);
    out.writeUInt32LE(r.crc, p + 14);
    out.writeUInt32LE(zip64 ? 0xffffffff : r.e.data.length, p + 18);
    out.writeUInt32LE(zip64 ? 0xffffffff : r.size, p + 22);
    out.writeUInt16LE(r.name.length, p + 26);
    out.writeUInt16LE(localExtra, p + 28);
    p += 30 + r.name.copy(out, p + 30);
    if (zip64) {
      out.writeUInt16LE(1, p);
      out.writeUInt16LE(16, p + 2);
      out.writeBigUInt64LE(BigInt(r.size), p + 4);
      out.writeBigUInt64LE(BigInt(r.e.data.length), p + 12);
      p += 20;
    }
    out.set(r.e.data, p);
    p += r.e.data.length;
  }
  for (const r of rows) {
    out.writeUInt32LE(0x02014b50, p);
    out.writeUInt16LE(version, p + 4);
    out.writeUInt16LE(version, p + 6);
    out.writeUInt16LE(r.method, p + 10);
    out.writeUInt32LE(r.crc, p + 16);
    out.writeUInt32LE(zip64 ? 0xffffffff : r.e.data.length, p + 20);
    out.writeUInt32LE(zip64 ? 0xffffffff : r.size, p + 24);
    out.writeUInt16LE(r.name.length, p + 28);
    out.writeUInt16LE(centralExtra, p + 30);
    out.writeUInt32LE(zip64 ? 0xffffffff : r.at, p + 42);
    p += 46 + r.name.copy(out, p + 46);
    if (zip64) {
      out.writeUInt16LE(1, p);
      out.writeUInt16LE(24, p + 2);
      out.writeBigUInt64LE(BigInt(r.size), p + 4);
      out.writeBigUInt64LE(BigInt(r.e.data.length), p + 12);
      out.writeBigUInt64LE(BigInt(r.at), p + 20);
      p += 28;
    }
  }
  const count = rows.length;
  if (zip64) {
    out.writeUInt32LE(0x06064b50, p);
    out.writeBigUInt64LE(44n, p + 4);
    out.writeBigUInt64LE(BigInt(count), p + 24);
    out.writeBigUInt64LE(BigInt(count), p + 32);
    out.writeBigUInt64LE(BigInt(cdSize), p + 40);
    out.writeBigUInt64LE(BigInt(offset), p + 48);
    out.writeUInt32LE(0x07064b50, p + 56);
    out.writeBigUInt64LE(BigInt(offset + cdSize), p + 64);
    out.writeUInt32LE(1, p + 72);
    p += 76;
  }
  out.writeUInt32LE(0x06054b50, p);
  out.writeUInt16LE(zip64 || count > 0xfffe ? 0xffff : count, p + 8);
  out.writeUInt16LE(zip64 || count > 0xfffe ? 0xffff : count, p + 10);
  out.writeUInt32LE(zip64 ? 0xffffffff : cdSize, p + 12);
  out.writeUInt32LE(zip64 ? 0xffffffff : offset, p + 16);
  return out;
}

/**
 * A raw-deflate stream of `mib` MiB of zeros, built without ever holding them: one MiB compressed once
 * (ending on a byte-aligned sync flush), repeated, then an empty final block. About 1 KiB per MiB.
 */
export function deflatedZeros(mib: number): Buffer {
  const oneMiB = zlib.deflateRawSync(Buffer.alloc(1 << 20), { level: 9, finishFlush: zlib.constants.Z_SYNC_FLUSH });
  const final = Buffer.from([0x03, 0x00]); // an empty fixed-Huffman block with BFINAL set
  return Buffer.concat([...new Array<Buffer>(mib).fill(oneMiB), final]);
}

// ---------------------------------------------------------------------------------------------
// Pickle (the opcodes torch.save uses, plus the few an attacker needs)

export const pk = {
  op: (...bytes: number[]) => Buffer.from(bytes),
  str(s: string): Buffer {
    const b = Buffer.from(s);
    const h = Buffer.alloc(5);
    h[0] = 0x58; // BINUNICODE
    h.writeUInt32LE(b.length, 1);
    return Buffer.concat([h, b]);
  },
  int(n: number): Buffer {
    const b = Buffer.alloc(5);
    b[0] = 0x4a; // BININT
    b.writeInt32LE(n, 1);
    return b;
  },
  /** An integer beyond 32 bits (LONG1, minimal little-endian two's complement). */
  long(n: bigint): Buffer {
    const bytes: number[] = [];
    let v = n;
    do {
      bytes.push(Number(v & 0xffn));
      v >>= 8n;
    } while (!((v === 0n && !(bytes[bytes.length - 1] & 0x80)) || (v === -1n && bytes[bytes.length - 1] & 0x80)));
    return Buffer.from([0x8a, bytes.length, ...bytes]);
  },
  put: (i: number) => Buffer.concat([Buffer.from([0x72]), u32(i)]), // LONG_BINPUT
  get: (i: number) => Buffer.concat([Buffer.from([0x6a]), u32(i)]), // LONG_BINGET
  global: (m: string, n: string) => Buffer.from(`c${m}\n${n}\n`, 'latin1'),
  tuple: (...items: Buffer[]) => Buffer.concat([Buffer.from([0x28]), ...items, Buffer.from([0x74])]),
  /**
   * _rebuild_tensor_v2(storage(type, key, numel), offset, size, stride, False, OrderedDict()). `size` may
   * be given as raw pickle bytes that push any value.
   */
  tensor(storageType: string, key: string, numel: number, offset: number, size: number[] | Buffer, stride: number[]): Buffer {
    const num = (n: number) => (Number.isSafeInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 ? pk.int(n) : pk.long(BigInt(n)));
    const persid = Buffer.concat([
      pk.tuple(pk.str('storage'), pk.global('torch', storageType), pk.str(key), pk.str('cpu'), num(numel)),
      Buffer.from([0x51]), // BINPERSID
    ]);
    const hooks = Buffer.concat([pk.global('collections', 'OrderedDict'), Buffer.from([0x29, 0x52])]);
    const args = pk.tuple(
      persid,
      num(offset),
      Buffer.isBuffer(size) ? size : pk.tuple(...size.map(num)),
      pk.tuple(...stride.map(num)),
      Buffer.from([0x89]),
      hooks,
    );
    return Buffer.concat([pk.global('torch._utils', '_rebuild_tensor_v2'), args, Buffer.from([0x52])]);
  },
  stateDict(items: [string, Buffer][]): Buffer {
    const body = items.flatMap(([k, v]) => [pk.str(k), v]);
    return Buffer.concat([Buffer.from([0x80, 0x02, 0x7d, 0x28]), ...body, Buffer.from([0x75, 0x2e])]);
  },
};

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n, 0);
  return b;
}

const STORAGE_OF = { f32: 'FloatStorage', f16: 'HalfStorage', bf16: 'BFloat16Storage', i32: 'IntStorage' } as const;

/** A torch.save()-style .pth of these tensors, one storage each, named like torch does (`<prefix>/data/<i>`). */
export function pthOf(tensors: RawTensor[], prefix = 'model'): Buffer {
  const items: [string, Buffer][] = tensors.map((t, i) => {
    const n = t.shape.reduce((a, b) => a * b, 1);
    const stride = t.shape.map((_, d) => t.shape.slice(d + 1).reduce((a, b) => a * b, 1));
    return [t.name, pk.tensor(STORAGE_OF[t.dtype], String(i), n, 0, t.shape, stride)];
  });
  return buildZip([
    { name: `${prefix}/data.pkl`, data: pk.stateDict(items) },
    { name: `${prefix}/byteorder`, data: Buffer.from('little') },
    ...tensors.map((t, i) => ({ name: `${prefix}/data/${i}`, data: t.bytes })),
  ]);
}

// ---------------------------------------------------------------------------------------------
// safetensors

/** Raw safetensors bytes from a header object (or its exact JSON text) and a data section (no validation). */
export function rawSafetensors(header: unknown, data: Uint8Array = new Uint8Array(0)): Buffer {
  const json = typeof header === 'string' ? Buffer.from(header) : Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, json, data]);
}

// ---------------------------------------------------------------------------------------------
// The crafted classes

export interface CraftedModel {
  /** Short id, also the file's base name. */
  name: string;
  /** What the file does to a naive loader. */
  what: string;
  /** The refusal must match this (a clear message naming the problem). */
  expect: RegExp;
  /** A tighter bound on the refusal's peak RSS growth than the general one, where the class needs it. */
  maxRssGrowthMiB?: number;
  /** Write the file into `dir`; returns its path. */
  write(dir: string): string;
}

/** The tensors of a tiny valid RWKV-7 model, to which a crafted class adds its poison. */
function tinyModel(): RawTensor[] {
  return [...randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 64, vocabSize: 64, dtype: 'f32', seed: 7 }).tensors.values()];
}

function f32Tensor(name: string, shape: number[]): RawTensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return { name, dtype: 'f32', shape, bytes: new Uint8Array(n * 4) };
}

/** A .pth holding one tensor `t` described by `item` (pickle bytes), with the given storage entries. */
function onePth(item: Buffer, storages: ZipInput[], stateDict?: Buffer, zip64 = false): Buffer {
  return buildZip([{ name: 'm/data.pkl', data: stateDict ?? pk.stateDict([['t', item]]) }, ...storages], zip64);
}

function writeFile(dir: string, name: string, data: Uint8Array): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, data);
  return file;
}

/** A pickle state dict with one tensor whose `size` argument is the value pushed by `size`. */
function tensorWithSize(size: Buffer, prelude: Buffer = Buffer.alloc(0)): Buffer {
  const body = pk.tensor('FloatStorage', '0', 1, 0, size, [1]);
  return Buffer.concat([Buffer.from([0x80, 0x02]), prelude, Buffer.from([0x7d, 0x28]), pk.str('t'), body, Buffer.from([0x75, 0x2e])]);
}

/** emb.weight and `layers` one-float tensors blocks.i.att.w0, as safetensors. */
function manyTensors(layers: number): Buffer {
  const header: Record<string, unknown> = { 'emb.weight': { dtype: 'F32', shape: [1, 1], data_offsets: [0, 4] } };
  for (let i = 0; i < layers; i++) header[`blocks.${i}.att.w0`] = { dtype: 'F32', shape: [1], data_offsets: [4 + 4 * i, 8 + 4 * i] };
  return rawSafetensors(header, new Uint8Array(4 + 4 * layers));
}

export const CRAFTED_MODELS: CraftedModel[] = [
  {
    name: 'huge-layer-index.pth',
    what: 'a valid 2-layer model plus one tensor blocks.1000000.att.w0 (a naive spec allocates a million layers)',
    expect: /blocks\.1000000\.att\.w0.*layer index 1000000/,
    write: (dir) => writeFile(dir, 'huge-layer-index.pth', pthOf([...tinyModel(), f32Tensor('blocks.1000000.att.w0', [1, 1, 64])])),
  },
  {
    name: 'huge-layer-index.st',
    what: 'the same as safetensors',
    expect: /blocks\.1000000\.att\.w0.*layer index 1000000/,
    write: (dir) => {
      const tensors = [...tinyModel(), f32Tensor('blocks.1000000.att.w0', [1, 1, 64])];
      const header: Record<string, unknown> = {};
      let at = 0;
      for (const t of tensors) {
        header[t.name] = { dtype: 'F32', shape: t.shape, data_offsets: [at, at + t.bytes.length] };
        at += t.bytes.length;
      }
      return writeFile(dir, 'huge-layer-index.st', rawSafetensors(header, Buffer.concat(tensors.map((t) => t.bytes))));
    },
  },
  {
    name: 'many-layers.st',
    what: '30,000 contiguous layers each holding only att.w0 (a spec listing every expected tensor first builds 1.2 million)',
    expect: /missing tensor blocks\.0\.ln0\.weight \(RWKV-7, 30000 layers\)/,
    // Loading 30,000 one-float tensors costs ~80 MiB; listing 1.2 million expected tensors first adds ~130.
    maxRssGrowthMiB: 150,
    write: (dir) => writeFile(dir, 'many-layers.st', manyTensors(30_000)),
  },
  {
    name: 'many-tensors.st',
    what: '40,000 tiny tensors (each read is a buffer of its own)',
    expect: /safetensors header declares 40001 tensors; at most \d+ are supported/,
    write: (dir) => writeFile(dir, 'many-tensors.st', manyTensors(40_000)),
  },
  {
    name: 'shared-nested-list.pth',
    what: 'a tensor size that is a list of 10 references to a list of 10 references ... 12 levels (10^12 leaves, 1 KB of pickle)',
    expect: /tensor size is not a tuple of non-negative integers/,
    write: (dir) => {
      const levels: Buffer[] = [pk.op(0x5d), pk.put(0), pk.op(0x30)]; // [] -> memo 0
      for (let k = 1; k <= 12; k++) {
        levels.push(pk.op(0x28), ...new Array<Buffer>(10).fill(pk.get(k - 1)), pk.op(0x6c), pk.put(k), pk.op(0x30));
      }
      const pkl = tensorWithSize(pk.get(12), Buffer.concat(levels));
      return writeFile(dir, 'shared-nested-list.pth', onePth(Buffer.alloc(0), [{ name: 'm/data/0', data: new Uint8Array(4) }], pkl));
    },
  },
  {
    name: 'deep-nesting.pth',
    what: 'a tensor size nested 200,000 lists deep',
    expect: /nested more than \d+ levels deep/,
    write: (dir) => {
      const n = 200_000;
      const size = Buffer.concat([Buffer.alloc(n, 0x5d), Buffer.alloc(n - 1, 0x61)]); // n × EMPTY_LIST, n-1 × APPEND
      return writeFile(dir, 'deep-nesting.pth', onePth(Buffer.alloc(0), [{ name: 'm/data/0', data: new Uint8Array(4) }], tensorWithSize(size)));
    },
  },
  {
    name: 'pickle-huge-integer.pth',
    what: 'one LONG4 integer of 4 MB (arbitrary-precision decoding is quadratic)',
    expect: /integer of 4194304 bytes is too large/,
    write: (dir) => {
      const n = 4 << 20;
      const long4 = Buffer.concat([Buffer.from([0x8b]), u32(n), Buffer.alloc(n, 0x11)]);
      const pkl = Buffer.concat([Buffer.from([0x80, 0x02]), long4, Buffer.from([0x2e])]);
      return writeFile(dir, 'pickle-huge-integer.pth', onePth(Buffer.alloc(0), [], pkl));
    },
  },
  {
    name: 'pickle-many-objects.pth',
    what: '12 million EMPTY_DICT opcodes (12 MB of pickle, ~3 GB of dicts)',
    expect: /more than \d+ values/,
    write: (dir) => {
      const pkl = Buffer.concat([Buffer.from([0x80, 0x02]), Buffer.alloc(12_000_000, 0x7d), Buffer.from([0x2e])]);
      return writeFile(dir, 'pickle-many-objects.pth', onePth(Buffer.alloc(0), [], pkl));
    },
  },
  {
    name: 'zip-bomb.pth',
    what: 'a 2 MB deflate-compressed storage entry declared (and inflating) to 2 GiB of f32',
    expect: /storage 0 of tensor t is compressed \(ZIP method 8\)/,
    write: (dir) => {
      const mib = 2048;
      const numel = (mib * 1024 * 1024) / 4;
      const item = pk.tensor('FloatStorage', '0', numel, 0, [numel], [1]);
      return writeFile(dir, 'zip-bomb.pth', onePth(item, [{ name: 'm/data/0', data: deflatedZeros(mib), method: 8, size: mib * 1024 * 1024 }]));
    },
  },
  {
    name: 'zip-overlap.pth',
    what: '200 tensors whose ZIP entries all point at the same 8 MB of stored data (1.6 GB read from an 8 MB file)',
    expect: /ZIP entries .* overlap/,
    write: (dir) => {
      const numel = (8 << 20) / 4;
      const items: [string, Buffer][] = [];
      const storages: ZipInput[] = [{ name: 'm/data/0', data: new Uint8Array(8 << 20) }];
      for (let i = 0; i < 200; i++) {
        items.push([`t${i}`, pk.tensor('FloatStorage', String(i), numel, 0, [numel], [1])]);
        if (i > 0) storages.push({ name: `m/data/${i}`, data: new Uint8Array(8 << 20), aliasOf: 'm/data/0' });
      }
      return writeFile(dir, 'zip-overlap.pth', onePth(Buffer.alloc(0), storages, pk.stateDict(items)));
    },
  },
  {
    name: 'zip-many-entries.pth',
    what: '100,000 empty ZIP entries (8 MB of central directory)',
    expect: /ZIP archive has 100002 entries; at most \d+ are allowed/,
    write: (dir) => {
      const storages: ZipInput[] = [];
      const empty = new Uint8Array(0);
      for (let i = 0; i < 100_000; i++) storages.push({ name: `m/data/${i}`, data: empty });
      return writeFile(dir, 'zip-many-entries.pth', onePth(pk.tensor('FloatStorage', '0', 0, 0, [0], [1]), [...storages, { name: 'm/x', data: new Uint8Array(0) }], undefined, true));
    },
  },
  {
    name: 'zip-max-entries.pth',
    what: '65,000 empty ZIP entries, within the entry bound: every local header is checked (then: not a model)',
    expect: /not an RWKV checkpoint/,
    write: (dir) => {
      const storages: ZipInput[] = [];
      const empty = new Uint8Array(0);
      for (let i = 0; i < 65_000; i++) storages.push({ name: `m/data/${i}`, data: empty });
      return writeFile(dir, 'zip-max-entries.pth', onePth(pk.tensor('FloatStorage', '0', 0, 0, [0], [1]), storages));
    },
  },
  {
    name: 'shared-storage-views.pth',
    what: '200 transposed views of one 8 MB storage (each gathered into a copy: 1.6 GB from an 8 MB file)',
    expect: /the tensors view 1677721600 bytes in total, more than twice the 8388608 bytes of their storages/,
    write: (dir) => {
      const items: [string, Buffer][] = [];
      for (let i = 0; i < 200; i++) items.push([`t${i}`, pk.tensor('FloatStorage', '0', 2048 * 1024, 0, [2048, 1024], [1, 2048])]);
      return writeFile(dir, 'shared-storage-views.pth', onePth(Buffer.alloc(0), [{ name: 'm/data/0', data: new Uint8Array(8 << 20) }], pk.stateDict(items)));
    },
  },
  {
    name: 'stride-zero.pth',
    what: 'a tensor of 400 million elements, stride 0, over a storage of one float (1.6 GB from 4 bytes)',
    expect: /tensor t has stride 0 in dimension 0/,
    write: (dir) =>
      writeFile(dir, 'stride-zero.pth', onePth(pk.tensor('FloatStorage', '0', 1, 0, [400_000_000], [0]), [{ name: 'm/data/0', data: new Uint8Array(4) }])),
  },
  {
    name: 'overlapping-view.pth',
    what: 'a 20000 × 20000 view with strides [1, 1] over 40,000 floats (1.6 GB from 160 KB)',
    expect: /tensor t views 400000000 elements of a storage of only 40000/,
    write: (dir) =>
      writeFile(
        dir,
        'overlapping-view.pth',
        onePth(pk.tensor('FloatStorage', '0', 40_000, 0, [20_000, 20_000], [1, 1]), [{ name: 'm/data/0', data: new Uint8Array(160_000) }]),
      ),
  },
  {
    name: 'view-out-of-range.pth',
    what: 'a view whose storage offset lies far past its storage',
    expect: /tensor t reaches element \d+ of a storage of 4 elements/,
    write: (dir) =>
      writeFile(dir, 'view-out-of-range.pth', onePth(pk.tensor('FloatStorage', '0', 4, 2 ** 40, [4], [1]), [{ name: 'm/data/0', data: new Uint8Array(16) }])),
  },
  {
    name: 'huge-shape.pth',
    what: 'a storage declared with 2^50 elements and a [2^25, 2^25] tensor over 16 bytes',
    expect: /storage 0 of tensor t has 16 bytes, expected 4503599627370496/,
    write: (dir) =>
      writeFile(dir, 'huge-shape.pth', onePth(pk.tensor('FloatStorage', '0', 2 ** 50, 0, [2 ** 25, 2 ** 25], [2 ** 25, 1]), [{ name: 'm/data/0', data: new Uint8Array(16) }])),
  },
  {
    name: 'huge-shape.st',
    what: 'a tensor of shape [2^31, 2^31, 2^31] declared over 4 bytes',
    expect: /"t": shape \[2147483648, 2147483648, 2147483648\] has more than 2\^53 elements/,
    write: (dir) => writeFile(dir, 'huge-shape.st', rawSafetensors({ t: { dtype: 'F32', shape: [2 ** 31, 2 ** 31, 2 ** 31], data_offsets: [0, 4] } }, new Uint8Array(4))),
  },
  {
    name: 'offsets-past-end.st',
    what: 'a tensor whose data_offsets end 1 TB past the end of the file',
    expect: /"t": data ends at byte 1099511627776 of the data section but the file has only 16 data bytes/,
    write: (dir) =>
      writeFile(dir, 'offsets-past-end.st', rawSafetensors({ t: { dtype: 'F32', shape: [2 ** 38], data_offsets: [0, 2 ** 40] } }, new Uint8Array(16))),
  },
  {
    name: 'overlapping-offsets.st',
    what: '1000 tensors all declared on the same 4 MB of data',
    expect: /safetensors tensors "t0" and "t1" overlap/,
    write: (dir) => {
      const header: Record<string, unknown> = {};
      for (let i = 0; i < 1000; i++) header[`t${i}`] = { dtype: 'F32', shape: [1 << 20], data_offsets: [0, 4 << 20] };
      return writeFile(dir, 'overlapping-offsets.st', rawSafetensors(header, new Uint8Array(4 << 20)));
    },
  },
  {
    name: 'huge-header.st',
    what: 'a 90 MB JSON header: one tensor whose shape lists 45 million ones',
    expect: /safetensors header length \d+ is implausible: larger than the \d+ bytes allowed/,
    write: (dir) => {
      const ones = 45 * 1024 * 1024 - 1;
      const json = `{"t":{"dtype":"F32","shape":[${'1,'.repeat(ones)}1],"data_offsets":[0,4]}}`;
      return writeFile(dir, 'huge-header.st', rawSafetensors(json, new Uint8Array(4)));
    },
  },
  {
    name: 'metadata-keys.st',
    what: '390,000 __metadata__ entries, just under the header item bound',
    expect: /safetensors __metadata__ has 390000 entries; at most \d+ are supported/,
    write: (dir) => {
      const parts: string[] = [];
      for (let i = 0; i < 390_000; i++) parts.push(`"k${i}":""`);
      return writeFile(dir, 'metadata-keys.st', rawSafetensors(`{"__metadata__":{${parts.join(',')}}}`));
    },
  },
  {
    name: 'byteorder-huge.pth',
    what: 'a 64 MB byteorder entry',
    expect: /byteorder entry of 67108864 bytes/,
    write: (dir) =>
      writeFile(dir, 'byteorder-huge.pth', onePth(pk.tensor('FloatStorage', '0', 1, 0, [1], [1]), [{ name: 'm/byteorder', data: new Uint8Array(64 << 20) }, { name: 'm/data/0', data: new Uint8Array(4) }])),
  },
  {
    name: 'dense-header.st',
    what: 'a header just under the size limit made of 5 million empty arrays',
    expect: /safetensors header has more than \d+ JSON arrays, objects and items/,
    write: (dir) => {
      const json = `{"__metadata__":{},"t":[${'[],'.repeat(5_000_000)}[]]}`;
      return writeFile(dir, 'dense-header.st', rawSafetensors(json, new Uint8Array(0)));
    },
  },
];
