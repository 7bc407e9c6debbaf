import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { loadCheckpoint, detectCheckpointFormat, openCheckpoint } from '../engine/loader/checkpoint';
import {
  bf16BitsToF32,
  f16BitsToF32,
  f32ToF16Bits,
  toF16Bits,
  toF32,
  toI32,
} from '../engine/loader/dtype';
import { withFile } from '../engine/loader/file-reader';
import { readPth } from '../engine/loader/pth';
import { ZipReader } from '../engine/loader/zip';
import { unpickle } from '../engine/loader/pickle';
import { readSafetensors, writeSafetensors } from '../engine/loader/safetensors';
import { describeModel, rwkv4Tensors, rwkv5Tensors, rwkv6Tensors, rwkv7TensorShapes } from '../engine/model-spec';
import { officialLoraDims, randomRwkv7Checkpoint, writeRandomRwkv7Safetensors } from '../engine/random-model';
import type { Checkpoint, DType, RawTensor } from '../engine/types';
import { buildZip, pk, rawSafetensors } from '../bench/crafted-models';
import { GOLDEN } from './paths';

const golden = (f: string) => path.join(GOLDEN, f);

// ---------------------------------------------------------------------------------------------
// Helpers that build test files byte by byte, independently of the code under test (the ZIP, pickle and
// safetensors writers live in bench/crafted-models.ts, shared with the hostile-file tests and bench).

function tensor(name: string, dtype: DType, shape: number[], values?: ArrayLike<number>): RawTensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const arr =
    dtype === 'f32' ? new Float32Array(n) : dtype === 'i32' ? new Int32Array(n) : new Uint16Array(n);
  if (values) arr.set(Array.from(values));
  else for (let i = 0; i < n; i++) arr[i] = dtype === 'f32' ? i * 0.5 : i % 1000;
  return { name, dtype, shape, bytes: new Uint8Array(arr.buffer) };
}

/** All entries of a ZIP (names and bytes), through the reader under test (torch's local headers defer sizes to data descriptors). */
function zipEntriesOf(file: string): { name: string; data: Uint8Array }[] {
  return withFile(file, (f) => {
    const zip = new ZipReader(f);
    return [...zip.entries.values()].map((e) => ({ name: e.name, data: zip.read(e) }));
  });
}

function f32Bytes(values: number[]): Uint8Array {
  return new Uint8Array(new Float32Array(values).buffer);
}

function cloneCheckpoint(ck: Checkpoint): Checkpoint {
  return { format: ck.format, metadata: { ...ck.metadata }, tensors: new Map(ck.tensors) };
}

// ---------------------------------------------------------------------------------------------

describe('loader', function () {
  let tmp: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-loader-'));
  });
  after(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  const tmpFile = (name: string, data?: Uint8Array) => {
    const p = path.join(tmp, name);
    if (data) fs.writeFileSync(p, data);
    return p;
  };

  describe('golden checkpoints', () => {
    for (const v of ['v4', 'v5', 'v6', 'v7', 'v7a', 'v7b']) {
      it(`${v}-tiny.pth (bf16) and ${v}-tiny.st (f16) hold the same tensors within f16 rounding`, () => {
        const pth = loadCheckpoint(golden(`${v}-tiny.pth`));
        const st = loadCheckpoint(golden(`${v}-tiny.st`));
        assert.strictEqual(pth.format, 'pth');
        assert.strictEqual(st.format, 'safetensors');
        assert.deepStrictEqual([...pth.tensors.keys()].sort(), [...st.tensors.keys()].sort());
        for (const [name, a] of pth.tensors) {
          const b = st.tensors.get(name)!;
          assert.strictEqual(a.dtype, 'bf16', name);
          assert.strictEqual(b.dtype, 'f16', name);
          assert.deepStrictEqual(a.shape, b.shape, name);
          // The .st was made by torch's bf16 → f16 cast (round to nearest even): bit-identical.
          assert.deepStrictEqual(toF16Bits(a), toF16Bits(b), name);
          const fa = toF32(a);
          const fb = toF32(b);
          for (let i = 0; i < fa.length; i++) {
            const tol = Math.abs(fa[i]) * 2 ** -11 + 2 ** -24;
            if (!(Math.abs(fa[i] - fb[i]) <= tol)) assert.fail(`${name}[${i}]: ${fa[i]} vs ${fb[i]}`);
          }
        }
      });
    }

    it('describes every golden model', () => {
      const expect: [string, object][] = [
        ['v4-tiny.pth', { version: 'v4', nLayer: 3, nEmbd: 128, vocabSize: 512, ffnDim: 512 }],
        ['v5-tiny.pth', { version: 'v5', nLayer: 3, nEmbd: 128, nHead: 2, headSize: 64, vocabSize: 512, ffnDim: 512 }],
        ['v6-tiny.pth', { version: 'v6', nLayer: 3, nEmbd: 128, nHead: 2, headSize: 64, vocabSize: 512, ffnDim: 448 }],
        ['v7-tiny.pth', { version: 'v7', nLayer: 3, nEmbd: 128, nHead: 2, headSize: 64, vocabSize: 512, ffnDim: 512 }],
        ['v7-tiny.st', { version: 'v7', nLayer: 3, nEmbd: 128, nHead: 2, headSize: 64, vocabSize: 512, ffnDim: 512 }],
        ['v7-vocab.pth', { version: 'v7', nLayer: 2, nEmbd: 128, nHead: 2, headSize: 64, vocabSize: 65536, ffnDim: 512 }],
      ];
      for (const [file, want] of expect) {
        const info = describeModel(loadCheckpoint(golden(file)));
        for (const [k, v] of Object.entries(want)) assert.strictEqual((info as never)[k], v, `${file} ${k}`);
        assert.strictEqual(info.vocabMap, undefined);
      }
      const v7 = describeModel(loadCheckpoint(golden('v7-tiny.pth')));
      assert.deepStrictEqual(v7.loraDims, { w: 32, a: 32, v: 16, g: 32 });
      assert.strictEqual(describeModel(loadCheckpoint(golden('v6-tiny.st'))).loraDims.w, 64);
    });

    it('v7-tiny.pth has exactly the x070 tensors, in official order', () => {
      const ck = loadCheckpoint(golden('v7-tiny.pth'));
      const info = describeModel(ck);
      const spec = rwkv7TensorShapes(info);
      assert.deepStrictEqual([...ck.tensors.keys()], spec.map(([n]) => n));
      for (const [name, shape] of spec) assert.deepStrictEqual(ck.tensors.get(name)!.shape, shape, name);
    });

    for (const [file, version] of [['v6-tiny.pth', 'v6'], ['v5-tiny.pth', 'v5']] as const) {
      it(`${file} has exactly the ${version} tensors; a missing, misshapen or extra tensor is refused by name`, () => {
        const ck = loadCheckpoint(golden(file));
        const info = describeModel(ck);
        const spec = version === 'v6' ? [...rwkv6Tensors(info, 32)] : [...rwkv5Tensors(info)];
        assert.deepStrictEqual(new Set(ck.tensors.keys()), new Set(spec.map(([n]) => n)));
        for (const [name, shape] of spec) assert.deepStrictEqual(ck.tensors.get(name)!.shape, shape, name);
        const missing = cloneCheckpoint(ck);
        missing.tensors.delete('blocks.2.att.gate.weight');
        assert.throws(() => describeModel(missing), /missing tensor blocks\.2\.att\.gate\.weight/);
        const bad = cloneCheckpoint(ck);
        bad.tensors.set('blocks.1.att.time_faaaa', tensor('blocks.1.att.time_faaaa', 'f16', [128]));
        assert.throws(() => describeModel(bad), /tensor blocks\.1\.att\.time_faaaa: wrong shape: expected \[2, 64\], got \[128\]/);
        const extra = cloneCheckpoint(ck);
        extra.tensors.set('blocks.1.att.mystery', tensor('blocks.1.att.mystery', 'f16', [4]));
        assert.throws(() => describeModel(extra), /unexpected tensor blocks\.1\.att\.mystery \[4\]/);
      });
    }

    it('v4-tiny.pth has exactly the RWKV-4 tensors; a missing, misshapen, extra or time_state tensor is refused by name', () => {
      const ck = loadCheckpoint(golden('v4-tiny.pth'));
      const info = describeModel(ck);
      assert.deepStrictEqual([info.nHead, info.headSize], [128, 1]);
      const spec = [...rwkv4Tensors(info)];
      assert.deepStrictEqual(new Set(ck.tensors.keys()), new Set(spec.map(([n]) => n)));
      for (const [name, shape] of spec) assert.deepStrictEqual(ck.tensors.get(name)!.shape, shape, name);
      const missing = cloneCheckpoint(ck);
      missing.tensors.delete('blocks.2.att.time_first');
      assert.throws(() => describeModel(missing), /missing tensor blocks\.2\.att\.time_first \(RWKV-4, 3 layers\)/);
      const bad = cloneCheckpoint(ck);
      bad.tensors.set('blocks.1.att.time_decay', tensor('blocks.1.att.time_decay', 'f16', [1, 1, 128]));
      assert.throws(() => describeModel(bad), /tensor blocks\.1\.att\.time_decay: wrong shape: expected \[128\], got \[1, 1, 128\]/);
      const extra = cloneCheckpoint(ck);
      extra.tensors.set('blocks.1.att.gate.weight', tensor('blocks.1.att.gate.weight', 'f16', [128, 128]));
      assert.throws(() => describeModel(extra), /unexpected tensor blocks\.1\.att\.gate\.weight \[128, 128\]: not part of the RWKV-4 layout/);
      const tuned = cloneCheckpoint(ck);
      for (let l = 0; l < 3; l++) tuned.tensors.set(`blocks.${l}.att.time_state`, tensor(`blocks.${l}.att.time_state`, 'f32', [128, 1, 1]));
      assert.throws(() => describeModel(tuned), /blocks\.0\.att\.time_state: embedded states are not supported for RWKV-4 models/);
    });

    for (const [file, variant] of [['v7a-tiny.pth', 'v7a'], ['v7b-tiny.pth', 'v7b']] as const) {
      it(`${file} is told apart as ${variant} and has exactly its tensors; a missing, misshapen or extra one is refused by name`, () => {
        const ck = loadCheckpoint(golden(file));
        const info = describeModel(ck);
        assert.deepStrictEqual(
          { ...info },
          { version: variant, nLayer: 3, nEmbd: 128, nHead: 2, headSize: 64, vocabSize: 512, ffnDim: 512, loraDims: { w: 32, a: 32, v: 16, g: 32 } },
        );
        const spec = rwkv7TensorShapes(info, variant);
        assert.deepStrictEqual(new Set(ck.tensors.keys()), new Set(spec.map(([n]) => n)));
        for (const [name, shape] of spec) assert.deepStrictEqual(ck.tensors.get(name)!.shape, shape, name);
        const label = variant === 'v7a' ? 'RWKV-7a' : 'RWKV-7b';
        const missing = cloneCheckpoint(ck);
        missing.tensors.delete('blocks.2.ffn.s0');
        assert.throws(() => describeModel(missing), new RegExp(`missing tensor blocks\\.2\\.ffn\\.s0 \\(${label}, 3 layers\\)`));
        const bad = cloneCheckpoint(ck);
        bad.tensors.set('blocks.1.ffn.s_emb.weight', tensor('blocks.1.ffn.s_emb.weight', 'f16', [512, 512]));
        assert.throws(() => describeModel(bad), /tensor blocks\.1\.ffn\.s_emb\.weight: wrong shape: expected \[512, 1024\], got \[512, 512\]/);
        const extra = cloneCheckpoint(ck);
        extra.tensors.set('blocks.1.ffn.mystery', tensor('blocks.1.ffn.mystery', 'f16', [4]));
        assert.throws(() => describeModel(extra), new RegExp(`unexpected tensor blocks\\.1\\.ffn\\.mystery \\[4\\]: not part of the ${label}`));
      });
    }

    it('a DeepEmbed or DEA tensor on a plain RWKV-7 layer, or DEA without DeepEmbed, is refused by name', () => {
      const v7a = loadCheckpoint(golden('v7a-tiny.pth'));
      // Layer 0 decides the variant: DeepEmbed tensors on later layers only are not a model.
      const partial = cloneCheckpoint(v7a);
      for (const n of [...partial.tensors.keys()]) if (n.startsWith('blocks.0.ffn.s')) partial.tensors.delete(n);
      assert.throws(() => describeModel(partial), /unexpected tensor blocks\.1\.ffn\.s1 \[128, 32\]: not part of the RWKV-7 \(x070\) layout/);
      const v7b = loadCheckpoint(golden('v7b-tiny.pth'));
      const deaOnly = cloneCheckpoint(v7b);
      for (const n of [...deaOnly.tensors.keys()]) if (/^blocks\.\d+\.ffn\.s/.test(n)) deaOnly.tensors.delete(n);
      assert.throws(() => describeModel(deaOnly), /unexpected tensor blocks\.0\.qkv\.qq\.weight \[256, 128\]: not part of the RWKV-7 \(x070\) layout/);
    });

    it('reads golden reference outputs (f32 and i32 safetensors)', () => {
      const g = readSafetensors(golden('v7-tiny.golden.st'));
      const tokens = toI32(g.tensors.get('tokens')!);
      assert.strictEqual(tokens.length, 24);
      assert.ok(tokens.every((t) => t >= 0 && t < 512));
      const logits = toF32(g.tensors.get('logits')!);
      assert.strictEqual(logits.length, 24 * 512);
      assert.ok(logits.every(Number.isFinite));
      assert.deepStrictEqual(g.tensors.get('state.0.att_kv')!.shape, [2, 64, 64]);
    });

    it('chooses the format by content, not by extension', () => {
      const st = tmpFile('really-safetensors.pth', fs.readFileSync(golden('v7-tiny.st')));
      const pth = tmpFile('really-torch.st', fs.readFileSync(golden('v7-tiny.pth')));
      assert.strictEqual(detectCheckpointFormat(st), 'safetensors');
      assert.strictEqual(detectCheckpointFormat(pth), 'pth');
      assert.strictEqual(loadCheckpoint(st).format, 'safetensors');
      assert.strictEqual(loadCheckpoint(pth).format, 'pth');
    });
  });

  describe('streaming reader', () => {
    for (const file of ['v7-tiny.pth', 'v7-tiny.st']) {
      it(`${file}: index without data, tensors on demand in any order, describeModel on the reader`, () => {
        const full = loadCheckpoint(golden(file));
        const reader = openCheckpoint(golden(file));
        try {
          assert.strictEqual(reader.format, full.format);
          assert.deepStrictEqual([...reader.tensors.keys()], [...full.tensors.keys()]);
          for (const [name, info] of reader.tensors) {
            assert.ok(!('bytes' in info), 'index carries no data');
            assert.deepStrictEqual(info.shape, full.tensors.get(name)!.shape);
          }
          assert.deepStrictEqual(describeModel(reader), describeModel(full));
          for (const name of [...reader.tensors.keys()].reverse()) {
            assert.deepStrictEqual(Buffer.from(reader.read(name).bytes), Buffer.from(full.tensors.get(name)!.bytes), name);
          }
          assert.throws(() => reader.read('no.such.tensor'), /no tensor named no\.such\.tensor/);
        } finally {
          reader.close();
        }
        reader.close(); // idempotent
        assert.throws(() => reader.read('emb.weight'), /checkpoint reader is closed/);
      });
    }

    it('reads vocab_map through the reader', () => {
      const base = loadCheckpoint(golden('v7-tiny.st'));
      const ids = Array.from({ length: 512 }, (_, i) => i * 100);
      const f = tmpFile('with-map.st');
      writeSafetensors(f, [...base.tensors.values(), tensor('vocab_map', 'i32', [512], ids)]);
      const reader = openCheckpoint(f);
      try {
        assert.deepStrictEqual([...describeModel(reader).vocabMap!], ids);
      } finally {
        reader.close();
      }
    });
  });

  describe('file errors', () => {
    it('missing, empty, directory, unrecognized', () => {
      assert.throws(() => loadCheckpoint(path.join(tmp, 'nope.pth')), /model file not found: .*nope\.pth/);
      assert.throws(() => loadCheckpoint(tmpFile('empty.st', new Uint8Array(0))), /model file is empty/);
      assert.throws(() => loadCheckpoint(tmp), /is a directory/);
      assert.throws(
        () => loadCheckpoint(tmpFile('text.bin', Buffer.from('hello, this is not a model at all'))),
        /unrecognized model file format/,
      );
      assert.throws(
        () => loadCheckpoint(tmpFile('legacy.pth', Buffer.from([0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20]))),
        /legacy \(pre-1\.6\) PyTorch serialization is not supported/,
      );
    });

    it('truncated .pth at many lengths', () => {
      const full = fs.readFileSync(golden('v7-tiny.pth'));
      for (const len of [1, 3, 4, 21, 100, 4096, full.length >> 1, full.length - 23, full.length - 1]) {
        const f = tmpFile(`cut-${len}.pth`, full.subarray(0, len));
        assert.throws(() => loadCheckpoint(f), /truncated/, `length ${len}`);
      }
    });

    it('truncated .st at many lengths', () => {
      const full = fs.readFileSync(golden('v7-tiny.st'));
      const headerEnd = 8 + Number(full.readBigUInt64LE(0));
      for (const len of [1, 7, 8, 9, 200, headerEnd - 1, headerEnd, headerEnd + 1000, full.length >> 1, full.length - 1]) {
        const f = tmpFile(`cut-${len}.st`, full.subarray(0, len));
        assert.throws(() => loadCheckpoint(f), /truncated/, `length ${len}`);
      }
    });

    it('corrupt safetensors headers', () => {
      const lenTooBig = Buffer.concat([Buffer.alloc(8), Buffer.from('{}')]);
      lenTooBig.writeBigUInt64LE(1n << 40n);
      assert.throws(() => loadCheckpoint(tmpFile('biglen.st', lenTooBig)), /header length 1099511627776 is implausible/);

      const badJson = Buffer.concat([Buffer.alloc(8), Buffer.from('{"a": [1, 2')]);
      badJson.writeBigUInt64LE(11n);
      assert.throws(() => loadCheckpoint(tmpFile('badjson.st', badJson)), /header is not valid JSON/);

      const cases: [string, unknown, RegExp][] = [
        ['size', { a: { dtype: 'F32', shape: [2, 3], data_offsets: [0, 20] } }, /"a": data_offsets cover 20 bytes but shape \[2, 3\] of F32 needs 24/],
        ['overlap', { a: { dtype: 'F16', shape: [4], data_offsets: [0, 8] }, b: { dtype: 'F16', shape: [4], data_offsets: [6, 14] } }, /"a" and "b" overlap/],
        ['dtype', { a: { dtype: 'F64', shape: [1], data_offsets: [0, 8] } }, /"a": unsupported dtype F64/],
        ['range', { a: { dtype: 'F32', shape: [100], data_offsets: [0, 400] } }, /"a": data ends at byte 400 .* only 16 data bytes \(file truncated\?\)/],
        ['offsets', { a: { dtype: 'F32', shape: [1], data_offsets: [8, 4] } }, /"a": data_offsets \[8, 4\] is not \[begin, end\]/],
        ['shape', { a: { dtype: 'F32', shape: [-1], data_offsets: [0, 4] } }, /"a": shape \[-1\] is not a list of non-negative integers/],
        ['meta', { __metadata__: { n: 5 } }, /__metadata__\.n is not a string/],
      ];
      for (const [name, header, re] of cases) {
        const f = tmpFile(`corrupt-${name}.st`, rawSafetensors(header, new Uint8Array(16)));
        assert.throws(() => loadCheckpoint(f), re, name);
      }
    });

    it('zip that is not a torch checkpoint', () => {
      const f = tmpFile('other.zip', buildZip([{ name: 'readme.txt', data: Buffer.from('hi') }]));
      assert.throws(() => loadCheckpoint(f), /ZIP archive is not a PyTorch checkpoint \(no <name>\/data\.pkl entry\)/);
    });

    it('corrupt data.pkl fails its CRC check', () => {
      const entries = zipEntriesOf(golden('v7-tiny.pth'));
      const pkl = entries.find((e) => e.name.endsWith('/data.pkl'))!;
      const damaged = Buffer.from(pkl.data);
      damaged[100] ^= 0xff;
      // Keep the original CRC: write the archive, then patch the bytes in place.
      const zip = buildZip(entries);
      const at = zip.indexOf(Buffer.from(pkl.data));
      damaged.copy(zip, at);
      assert.throws(() => loadCheckpoint(tmpFile('crc.pth', zip)), /CRC mismatch in entry v7-tiny\/data\.pkl/);
    });
  });

  describe('.pth reading', () => {
    it('reads the same tensors from a ZIP64 re-pack of a golden file', () => {
      const entries = zipEntriesOf(golden('v7-tiny.pth'));
      const f = tmpFile('zip64.pth', buildZip(entries, true));
      const a = loadCheckpoint(golden('v7-tiny.pth'));
      const b = loadCheckpoint(f);
      assert.strictEqual(b.tensors.size, a.tensors.size);
      for (const [name, t] of a.tensors) assert.deepStrictEqual(b.tensors.get(name)!.bytes, t.bytes, name);
    });

    it('storage offsets, shared storages, transposed (non-contiguous) views, f32/f16/i32', () => {
      const storage0 = f32Bytes([0, 1, 2, 3, 4, 5, 6, 7]);
      const storage1 = new Uint8Array(new Uint16Array([0x3c00, 0x4000, 0x4200]).buffer);
      const storage2 = new Uint8Array(new Int32Array([7, -3]).buffer);
      const pkl = pk.stateDict([
        ['whole', pk.tensor('FloatStorage', '0', 8, 0, [2, 4], [4, 1])],
        ['tail', pk.tensor('FloatStorage', '0', 8, 5, [3], [1])],
        ['transposed', pk.tensor('FloatStorage', '0', 8, 0, [4, 2], [1, 4])],
        ['half', pk.tensor('HalfStorage', '1', 3, 1, [2], [1])],
        ['ints', pk.tensor('IntStorage', '2', 2, 0, [2], [1])],
      ]);
      const f = tmpFile('crafted.pth', buildZip([
        { name: 'crafted/data.pkl', data: pkl },
        { name: 'crafted/byteorder', data: Buffer.from('little') },
        { name: 'crafted/data/0', data: storage0 },
        { name: 'crafted/data/1', data: storage1 },
        { name: 'crafted/data/2', data: storage2 },
      ]));
      const ck = readPth(f);
      assert.deepStrictEqual([...toF32(ck.tensors.get('whole')!)], [0, 1, 2, 3, 4, 5, 6, 7]);
      assert.deepStrictEqual([...toF32(ck.tensors.get('tail')!)], [5, 6, 7]);
      assert.deepStrictEqual([...toF32(ck.tensors.get('transposed')!)], [0, 4, 1, 5, 2, 6, 3, 7]);
      assert.deepStrictEqual(ck.tensors.get('transposed')!.shape, [4, 2]);
      assert.deepStrictEqual([...toF32(ck.tensors.get('half')!)], [2, 3]);
      assert.deepStrictEqual([...toI32(ck.tensors.get('ints')!)], [7, -3]);
      // Views of one storage read in another order, and twice, through the streaming reader.
      const reader = openCheckpoint(f);
      try {
        for (const name of ['transposed', 'tail', 'whole', 'tail']) {
          assert.deepStrictEqual(Buffer.from(reader.read(name).bytes), Buffer.from(ck.tensors.get(name)!.bytes), name);
        }
      } finally {
        reader.close();
      }
    });

    it('errors name the problem: storage type, missing storage, out-of-range view, byte order', () => {
      const one = (extra: { name: string; data: Uint8Array }[], item: Buffer, name: string) =>
        tmpFile(`${name}.pth`, buildZip([{ name: 'm/data.pkl', data: pk.stateDict([['t', item]]) }, ...extra]));
      assert.throws(
        () => readPth(one([{ name: 'm/data/0', data: new Uint8Array(16) }], pk.tensor('DoubleStorage', '0', 2, 0, [2], [1]), 'double')),
        /tensor t uses torch\.DoubleStorage, which is not supported/,
      );
      assert.throws(() => readPth(one([], pk.tensor('FloatStorage', '0', 2, 0, [2], [1]), 'nostorage')), /storage 0 of tensor t is missing from the archive/);
      assert.throws(
        () => readPth(one([{ name: 'm/data/0', data: new Uint8Array(8) }], pk.tensor('FloatStorage', '0', 2, 1, [2], [1]), 'range')),
        /tensor t reaches element 2 of a storage of 2 elements/,
      );
      assert.throws(
        () => readPth(one([{ name: 'm/data/0', data: new Uint8Array(4) }], pk.tensor('FloatStorage', '0', 2, 0, [2], [1]), 'short')),
        /storage 0 of tensor t has 4 bytes, expected 8/,
      );
      assert.throws(
        () => readPth(one([{ name: 'm/byteorder', data: Buffer.from('big') }], pk.tensor('FloatStorage', '0', 2, 0, [2], [1]), 'big')),
        /byte order is "big"/,
      );
    });

    it('unknown globals and opcodes are named', () => {
      const entries = zipEntriesOf(golden('v7-tiny.pth'));
      const pkl = entries.find((e) => e.name.endsWith('/data.pkl'))!;
      const evil = Buffer.from(
        Buffer.from(pkl.data).toString('latin1').replace('torch._utils\n_rebuild_tensor_v2\n', 'os\nsystem\n'),
        'latin1',
      );
      const patched = entries.map((e) => (e === pkl ? { name: e.name, data: evil } : e));
      assert.throws(() => loadCheckpoint(tmpFile('evil.pth', buildZip(patched))), /unsupported global os\.system/);

      const hooks = { findClass: () => undefined, persistentLoad: () => null };
      assert.throws(() => unpickle(new Uint8Array([0x80, 0x02, 0xff]), hooks), /unsupported opcode 0xff \(at byte 2\)/);
      assert.throws(() => unpickle(new Uint8Array([0x80, 0x02, 0x69]), hooks), /unsupported opcode 0x69 'i'/);
      assert.throws(() => unpickle(new Uint8Array([0x80, 0x02, 0x58, 0x10]), hooks), /unexpected end of data/);
      assert.throws(() => unpickle(new Uint8Array([0x80, 0x09]), hooks), /unsupported pickle protocol 9/);
    });

    it('unpickles protocol-4 style data (FRAME, MEMOIZE, SHORT_BINUNICODE, LONG1, lists, nested dicts)', () => {
      const data = new Uint8Array([
        0x80, 0x04, 0x95, 0x20, 0, 0, 0, 0, 0, 0, 0, // PROTO 4, FRAME
        0x7d, 0x94, // EMPTY_DICT, MEMOIZE
        0x28, // MARK
        0x8c, 0x01, 0x61, 0x94, // 'a'
        0x5d, 0x94, 0x28, 0x4b, 0x01, 0x8a, 0x02, 0xff, 0x7f, 0x88, 0x4e, 0x65, // [1, 32767, True, None]
        0x8c, 0x01, 0x62, 0x94, // 'b'
        0x8a, 0x01, 0xff, // LONG1 -1
        0x8c, 0x01, 0x63, 0x68, 0x01, // 'c' -> memo[1] ('a')
        0x75, 0x2e, // SETITEMS, STOP
      ]);
      const r = unpickle(data, { findClass: () => undefined, persistentLoad: () => null }) as Map<string, unknown>;
      assert.deepStrictEqual(r.get('a'), [1, 32767, true, null]);
      assert.strictEqual(r.get('b'), -1);
      assert.strictEqual(r.get('c'), 'a');
    });
  });

  describe('describeModel', () => {
    let base: Checkpoint;
    before(() => {
      base = loadCheckpoint(golden('v7-tiny.st'));
    });

    it('missing tensor', () => {
      const ck = cloneCheckpoint(base);
      ck.tensors.delete('blocks.2.ffn.value.weight');
      assert.throws(() => describeModel(ck), /^Error: missing tensor blocks\.2\.ffn\.value\.weight \(RWKV-7, 3 layers\)$/);
      const ck2 = cloneCheckpoint(base);
      ck2.tensors.delete('blocks.1.att.v0');
      assert.throws(() => describeModel(ck2), /missing tensor blocks\.1\.att\.v0/);
    });

    it('wrong shape names the first offending tensor, expected vs got', () => {
      const ck = cloneCheckpoint(base);
      ck.tensors.set('blocks.1.att.k_k', tensor('blocks.1.att.k_k', 'f16', [128]));
      ck.tensors.set('blocks.2.att.k_k', tensor('blocks.2.att.k_k', 'f16', [64]));
      assert.throws(() => describeModel(ck), /tensor blocks\.1\.att\.k_k: wrong shape: expected \[1, 1, 128\], got \[128\]/);

      const ck2 = cloneCheckpoint(base);
      ck2.tensors.set('blocks.2.att.w1', tensor('blocks.2.att.w1', 'f16', [128, 64]));
      assert.throws(() => describeModel(ck2), /tensor blocks\.2\.att\.w1: wrong shape: expected \[128, 32\], got \[128, 64\]/);

      const ck3 = cloneCheckpoint(base);
      ck3.tensors.set('head.weight', tensor('head.weight', 'f16', [500, 128]));
      assert.throws(() => describeModel(ck3), /tensor head\.weight: wrong shape: expected \[512, 128\], got \[500, 128\]/);

      const ck4 = cloneCheckpoint(base);
      ck4.tensors.set('blocks.0.att.r_k', tensor('blocks.0.att.r_k', 'f16', [3, 64]));
      const ck5 = cloneCheckpoint(base);
      ck5.tensors.set('blocks.0.att.r_k', tensor('blocks.0.att.r_k', 'f16', [128]));
      assert.throws(() => describeModel(ck5), /blocks\.0\.att\.r_k: shape \[128\] does not split n_embd 128/);
      assert.throws(() => describeModel(ck4), /blocks\.0\.att\.r_k: shape \[3, 64\] does not split n_embd 128 into \[heads, head size\]/);
    });

    it('wrong dtype', () => {
      const ck = cloneCheckpoint(base);
      ck.tensors.set('blocks.0.att.w0', tensor('blocks.0.att.w0', 'i32', [1, 1, 128]));
      assert.throws(() => describeModel(ck), /tensor blocks\.0\.att\.w0: wrong dtype: expected f32, f16 or bf16, got i32/);
    });

    it('unexpected extra tensors are rejected, unused layer-0 v0/v1/v2 tolerated', () => {
      const ck = cloneCheckpoint(base);
      ck.tensors.set('blocks.1.att.mystery', tensor('blocks.1.att.mystery', 'f16', [4]));
      assert.throws(() => describeModel(ck), /unexpected tensor blocks\.1\.att\.mystery \[4\]: not part of the RWKV-7/);
      const ck2 = cloneCheckpoint(base);
      ck2.tensors.set('blocks.0.att.v0', tensor('blocks.0.att.v0', 'f16', [1, 1, 128]));
      ck2.tensors.set('blocks.0.att.v1', tensor('blocks.0.att.v1', 'f16', [128, 16]));
      ck2.tensors.set('blocks.0.att.v2', tensor('blocks.0.att.v2', 'f16', [16, 128]));
      assert.strictEqual(describeModel(ck2).version, 'v7');
    });

    it('non-RWKV checkpoints', () => {
      const f = tmpFile('bert.st');
      writeSafetensors(f, [tensor('encoder.layer.0.attention.self.query.weight', 'f32', [4, 4]), tensor('pooler.dense.bias', 'f32', [4])]);
      const ck = loadCheckpoint(f);
      assert.throws(() => describeModel(ck), /^Error: not an RWKV checkpoint \(no emb\.weight \/ blocks\.N\.\* tensors\)$/);
      const onlyEmb = cloneCheckpoint(base);
      for (const k of [...onlyEmb.tensors.keys()]) if (k.startsWith('blocks.')) onlyEmb.tensors.delete(k);
      assert.throws(() => describeModel(onlyEmb), /not an RWKV checkpoint/);
      const odd = cloneCheckpoint(base);
      for (const k of [...odd.tensors.keys()]) if (/att\.(w0|a0|k_k)$/.test(k)) odd.tensors.delete(k);
      assert.throws(() => describeModel(odd), /tensor names match none of RWKV v4, v5, v6, v7/);
    });

    it('vocab_map: valid, duplicate, out of range, wrong dtype', () => {
      const withMap = (values: number[], dtype: DType = 'i32') => {
        const ck = cloneCheckpoint(base);
        ck.tensors.set('vocab_map', tensor('vocab_map', dtype, [values.length], values));
        return ck;
      };
      const ids = Array.from({ length: 512 }, (_, i) => 65535 - i * 3);
      const info = describeModel(withMap(ids));
      assert.ok(info.vocabMap instanceof Int32Array);
      assert.deepStrictEqual([...info.vocabMap!], ids);
      const dup = [...ids];
      dup[300] = dup[10];
      assert.throws(() => describeModel(withMap(dup)), new RegExp(`vocab_map: token id ${dup[10]} appears more than once \\(again at row 300\\)`));
      const neg = [...ids];
      neg[5] = -1;
      assert.throws(() => describeModel(withMap(neg)), /vocab_map: entry 5 is -1, outside the World vocabulary 0\.\.65535/);
      const big = [...ids];
      big[7] = 65536;
      assert.throws(() => describeModel(withMap(big)), /entry 7 is 65536/);
      assert.throws(() => describeModel(withMap(ids.slice(0, 100))), /vocab_map: wrong shape: expected \[512\], got \[100\]/);
      assert.throws(() => describeModel(withMap(ids, 'f32')), /vocab_map: wrong dtype: expected i32, got f32/);
    });
  });

  describe('dtype conversions', () => {
    /** Independent reference: nearest f16 by search over all finite f16 values, ties to even. */
    const finite: { v: number; bits: number }[] = [];
    for (let h = 0; h < 0x7c00; h++) finite.push({ v: f16BitsToF32(h), bits: h });
    function refF16(x: number): number {
      if (Number.isNaN(x)) return -1;
      const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
      const a = Math.abs(x);
      // Values at or above 65520 (halfway between 65504 and the next step 65536) round to inf.
      if (a >= 65520) return sign | 0x7c00;
      let lo = 0;
      let hi = finite.length - 1;
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (finite[mid].v <= a) lo = mid;
        else hi = mid;
      }
      const dl = a - finite[lo].v;
      const dh = finite[hi].v - a;
      const pick = dl < dh ? lo : dh < dl ? hi : finite[lo].bits % 2 === 0 ? lo : hi;
      return sign | finite[pick].bits;
    }

    it('f16 → f32 edge values', () => {
      assert.strictEqual(f16BitsToF32(0x3c00), 1);
      assert.strictEqual(f16BitsToF32(0xc000), -2);
      assert.strictEqual(f16BitsToF32(0x7bff), 65504);
      assert.strictEqual(f16BitsToF32(0x0001), 2 ** -24);
      assert.strictEqual(f16BitsToF32(0x03ff), 1023 * 2 ** -24);
      assert.strictEqual(f16BitsToF32(0x0400), 2 ** -14);
      assert.ok(Object.is(f16BitsToF32(0x8000), -0));
      assert.strictEqual(f16BitsToF32(0x7c00), Infinity);
      assert.strictEqual(f16BitsToF32(0xfc00), -Infinity);
      assert.ok(Number.isNaN(f16BitsToF32(0x7e00)));
      // Whole-array path agrees with the scalar one for every bit pattern.
      const all = new Uint16Array(65536).map((_, i) => i);
      const f = toF32({ name: 'all', dtype: 'f16', shape: [65536], bytes: new Uint8Array(all.buffer) });
      for (let h = 0; h < 65536; h++) {
        const want = f16BitsToF32(h);
        if (!(Object.is(f[h], want) || (Number.isNaN(want) && Number.isNaN(f[h])))) assert.fail(`0x${h.toString(16)}`);
      }
    });

    it('f32 → f16 rounds to nearest even (normals, subnormals, overflow, inf, nan)', () => {
      const cases: [number, number][] = [
        [0, 0x0000], [-0, 0x8000], [1, 0x3c00], [-2, 0xc000], [65504, 0x7bff],
        [65519.99, 0x7bff], [65520, 0x7c00], [1e10, 0x7c00], [-1e10, 0xfc00],
        [Infinity, 0x7c00], [-Infinity, 0xfc00],
        [1 + 2 ** -11, 0x3c00], // tie → even (down)
        [1 + 3 * 2 ** -11, 0x3c02], // tie → even (up)
        [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just above the tie
        [2 ** -24, 0x0001], [2 ** -25, 0x0000], [-(2 ** -25), 0x8000], // half the smallest subnormal → 0
        [1.5 * 2 ** -25, 0x0001], [3 * 2 ** -25, 0x0002], [5 * 2 ** -25, 0x0002],
        [2 ** -14, 0x0400], [2 ** -14 - 2 ** -25, 0x0400], // rounds up from subnormal into the smallest normal
        [1e-10, 0x0000], [1.401298464324817e-45, 0x0000],
      ];
      for (const [x, bits] of cases) assert.strictEqual(f32ToF16Bits(x), bits, `${x}`);
      const nan = f32ToF16Bits(NaN);
      assert.ok((nan & 0x7c00) === 0x7c00 && (nan & 0x3ff) !== 0, 'NaN stays NaN');
      // Every finite f16 survives a round trip.
      for (let h = 0; h < 65536; h++) {
        if ((h & 0x7c00) === 0x7c00 && h & 0x3ff) continue;
        if (f32ToF16Bits(f16BitsToF32(h)) !== h) assert.fail(`round trip 0x${h.toString(16)}`);
      }
    });

    it('f32 → f16 and bf16 → f16 agree with an independent nearest-value search', () => {
      // Every bf16 value (these are exactly what .pth → f16 conversion sees).
      const bf = new Uint16Array(65536).map((_, i) => i);
      const got = toF16Bits({ name: 'bf', dtype: 'bf16', shape: [65536], bytes: new Uint8Array(bf.buffer) });
      for (let b = 0; b < 65536; b++) {
        const x = bf16BitsToF32(b);
        const want = refF16(x);
        if (want < 0) {
          if ((got[b] & 0x7c00) !== 0x7c00 || !(got[b] & 0x3ff)) assert.fail(`bf16 NaN 0x${b.toString(16)}`);
        } else if (got[b] !== want) {
          assert.fail(`bf16 0x${b.toString(16)} (${x}): got 0x${got[b].toString(16)}, want 0x${want.toString(16)}`);
        }
      }
      // Random f32 bit patterns across the whole range, through the array path.
      let s = 12345;
      const f32 = new Float32Array(200000);
      const u32 = new Uint32Array(f32.buffer);
      for (let i = 0; i < u32.length; i++) {
        s ^= s << 13; s ^= s >>> 17; s ^= s << 5;
        // Bias exponents toward the f16 range so subnormals and rounding are exercised.
        u32[i] = i % 2 ? s >>> 0 : ((s & 0x807fffff) | ((100 + ((s >>> 23) & 31)) << 23)) >>> 0;
      }
      const h = toF16Bits({ name: 'r', dtype: 'f32', shape: [f32.length], bytes: new Uint8Array(f32.buffer) });
      for (let i = 0; i < f32.length; i++) {
        const want = refF16(f32[i]);
        if (want >= 0 && h[i] !== want) assert.fail(`f32 ${f32[i]}: got 0x${h[i].toString(16)}, want 0x${want.toString(16)}`);
      }
    });

    it('bf16 → f32 is exact, and unaligned tensor bytes are handled', () => {
      assert.strictEqual(bf16BitsToF32(0x3f80), 1);
      assert.strictEqual(bf16BitsToF32(0xc0a0), -5);
      assert.strictEqual(bf16BitsToF32(0x7f80), Infinity);
      const raw = new Uint8Array(7);
      raw.set([0x80, 0x3f, 0x00, 0x40], 1); // bf16 [1, 2] at odd offset 1
      const t: RawTensor = { name: 'u', dtype: 'bf16', shape: [2], bytes: raw.subarray(1, 5) };
      assert.deepStrictEqual([...toF32(t)], [1, 2]);
      assert.deepStrictEqual([...toF16Bits(t)], [0x3c00, 0x4000]);
      const f = new Uint8Array(9);
      f.set(f32Bytes([1.5, -3]), 1);
      assert.deepStrictEqual([...toF32({ name: 'f', dtype: 'f32', shape: [2], bytes: f.subarray(1) })], [1.5, -3]);
      assert.throws(() => toF32({ name: 'ids', dtype: 'i32', shape: [1], bytes: new Uint8Array(4) }), /tensor ids is i32; expected a float type/);
    });
  });

  describe('safetensors writer', () => {
    it('round-trips every dtype, metadata, empty and scalar tensors', () => {
      const tensors = [
        tensor('a.f32', 'f32', [3, 5]),
        tensor('b.f16', 'f16', [7]),
        tensor('c.bf16', 'bf16', [2, 1, 3]),
        tensor('d.i32', 'i32', [5], [-1, 0, 1, 65535, -2147483648]),
        tensor('e.empty', 'f16', [0, 4]),
        tensor('f.scalar', 'f32', [], [42]),
      ];
      const f = tmpFile('roundtrip.st');
      writeSafetensors(f, tensors, { format: 'pt', note: 'ünïcode' });
      const raw = fs.readFileSync(f);
      assert.strictEqual(Number(raw.readBigUInt64LE(0)) % 8, 0, 'header padded to 8 bytes');
      const ck = readSafetensors(f);
      assert.deepStrictEqual(ck.metadata, { format: 'pt', note: 'ünïcode' });
      assert.deepStrictEqual([...ck.tensors.keys()], tensors.map((t) => t.name));
      for (const t of tensors) {
        const r = ck.tensors.get(t.name)!;
        assert.strictEqual(r.dtype, t.dtype);
        assert.deepStrictEqual(r.shape, t.shape);
        assert.deepStrictEqual(Buffer.from(r.bytes), Buffer.from(t.bytes), t.name);
      }
      assert.deepStrictEqual([...toI32(ck.tensors.get('d.i32')!)], [-1, 0, 1, 65535, -2147483648]);
      assert.deepStrictEqual(fs.readdirSync(tmp).filter((n) => n.endsWith('.tmp')), [], 'no temp file left');
    });

    it('a golden checkpoint survives write → read unchanged', () => {
      const a = loadCheckpoint(golden('v7-tiny.pth'));
      const f = tmpFile('v7-copy.st');
      writeSafetensors(f, a.tensors);
      const b = loadCheckpoint(f);
      assert.deepStrictEqual(describeModel(b), describeModel(a));
      for (const [name, t] of a.tensors) assert.deepStrictEqual(Buffer.from(b.tensors.get(name)!.bytes), Buffer.from(t.bytes), name);
    });

    it('rejects inconsistent tensors', () => {
      const bad: RawTensor = { name: 'x', dtype: 'f32', shape: [3], bytes: new Uint8Array(8) };
      assert.throws(() => writeSafetensors(tmpFile('bad.st'), [bad]), /tensor "x" has 8 bytes, shape \[3\] of f32 needs 12/);
      assert.throws(() => writeSafetensors(tmpFile('dup.st'), [tensor('y', 'f32', [1]), tensor('y', 'f32', [1])]), /duplicate or reserved tensor name "y"/);
      assert.ok(!fs.existsSync(path.join(tmp, 'bad.st')));
    });
  });

  describe('random RWKV-7 model', () => {
    it('official LoRA ranks of released model sizes', () => {
      assert.deepStrictEqual(officialLoraDims(768), { w: 64, a: 64, v: 32, g: 128 });
      assert.deepStrictEqual(officialLoraDims(2048), { w: 96, a: 96, v: 64, g: 256 });
      assert.deepStrictEqual(officialLoraDims(2560), { w: 96, a: 96, v: 64, g: 320 });
    });

    it('passes describeModel, is deterministic per seed, values in their init ranges', () => {
      const opts = { nLayer: 4, nEmbd: 256, vocabSize: 1000, seed: 7 };
      const ck = randomRwkv7Checkpoint(opts);
      const info = describeModel(ck);
      assert.deepStrictEqual(
        { ...info },
        { version: 'v7', nLayer: 4, nEmbd: 256, nHead: 4, headSize: 64, vocabSize: 1000, ffnDim: 1024, loraDims: officialLoraDims(256) },
      );
      const again = randomRwkv7Checkpoint(opts);
      const other = randomRwkv7Checkpoint({ ...opts, seed: 8 });
      let differs = 0;
      for (const [name, t] of ck.tensors) {
        assert.strictEqual(t.dtype, 'f16');
        assert.deepStrictEqual(again.tensors.get(name)!.bytes, t.bytes, name);
        if (Buffer.compare(Buffer.from(other.tensors.get(name)!.bytes), Buffer.from(t.bytes)) !== 0) differs++;
        const v = toF32(t);
        assert.ok(v.every(Number.isFinite), name);
        const min = v.reduce((a, b) => Math.min(a, b), Infinity);
        const max = v.reduce((a, b) => Math.max(a, b), -Infinity);
        if (/\.(x_[rwkvag])$/.test(name)) assert.ok(min >= 0 && max <= 1 && max - min > 0.5, name);
        if (name.endsWith('.att.w0')) assert.ok(min >= -5 && max <= -1, name);
        if (/ln\d?\.weight$|ln_out\.weight$/.test(name)) assert.ok(min === 1 && max === 1, name);
        if (name.endsWith('att.key.weight')) {
          const std = Math.sqrt(v.reduce((a, b) => a + b * b, 0) / v.length);
          assert.ok(Math.abs(std - 1 / 16) < 0.005, `${name} std ${std}`);
        }
      }
      assert.ok(differs > ck.tensors.size / 2, 'another seed gives other weights');
    });

    it('f32 variant and safetensors helper', () => {
      const f = tmpFile('random.st');
      const dims = writeRandomRwkv7Safetensors(f, { nLayer: 2, nEmbd: 128, vocabSize: 300, dtype: 'f32', headSize: 32, ffnDim: 448 });
      const ck = loadCheckpoint(f);
      const info = describeModel(ck);
      assert.strictEqual(info.nHead, 4);
      assert.strictEqual(info.ffnDim, 448);
      assert.deepStrictEqual({ ...info, version: undefined }, { ...dims, version: undefined });
      assert.ok([...ck.tensors.values()].every((t) => t.dtype === 'f32'));
      assert.strictEqual(ck.metadata.generator, 'rwkv-flow random-model');
      const mem = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 300, dtype: 'f32', headSize: 32, ffnDim: 448 });
      for (const [name, t] of mem.tensors) assert.deepStrictEqual(Buffer.from(ck.tensors.get(name)!.bytes), Buffer.from(t.bytes), name);
    });

    it('rejects impossible dimensions', () => {
      assert.throws(() => randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 100, vocabSize: 10 }), /nEmbd 100 is not a multiple of headSize 64/);
      assert.throws(() => randomRwkv7Checkpoint({ nLayer: 0, nEmbd: 64, vocabSize: 10 }), /nLayer must be a positive integer/);
    });
  });
});
