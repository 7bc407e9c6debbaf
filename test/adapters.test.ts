// Adapter choice (index or name substring), `rwkv-flow adapters`, and a model too large for the adapter's buffer
// limits refused before its weights are read, with the sizes named.

import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { createBackend } from '../engine/backend';
import { checkAdapterFits, listAdapters, ModelTooLargeError, selectAdapter } from '../engine/gpu/device';
import { checkEngineConfig } from '../engine/engine-config';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { REPO_ROOT } from './paths';

/**
 * A tiny RWKV-7 safetensors file whose emb.weight and head.weight declare `bigVocab` rows: their data is a
 * hole in a sparse file, so the file is large on paper and costs no disk.
 */
function writeSparseModel(file: string, bigVocab: number): void {
  const ck = randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 64, headSize: 64, vocabSize: 16, dtype: 'f16', seed: 3 });
  const header: Record<string, unknown> = {};
  const parts: { offset: number; bytes: Uint8Array | null }[] = [];
  let offset = 0;
  for (const t of ck.tensors.values()) {
    const big = t.name === 'emb.weight' || t.name === 'head.weight';
    const shape = big ? [bigVocab, t.shape[1]] : t.shape;
    const size = big ? bigVocab * t.shape[1] * 2 : t.bytes.byteLength;
    header[t.name] = { dtype: 'F16', shape, data_offsets: [offset, offset + size] };
    parts.push({ offset, bytes: big ? null : t.bytes });
    offset += size;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const head = Buffer.alloc(8 + json.length);
  head.writeBigUInt64LE(BigInt(json.length), 0);
  head.write(json, 8, 'latin1');
  const fd = fs.openSync(file, 'w');
  try {
    fs.writeSync(fd, head, 0, head.length, 0);
    for (const p of parts) if (p.bytes) fs.writeSync(fd, p.bytes, 0, p.bytes.length, head.length + p.offset);
    fs.ftruncateSync(fd, head.length + offset);
  } finally {
    fs.closeSync(fd);
  }
}

describe('adapter choice and limits', function () {
  this.timeout(300000);
  const adapters = [
    { index: 0, name: 'llvmpipe (LLVM 15.0.6, 256 bits)' },
    { index: 1, name: 'NVIDIA H200' },
  ];

  it('selects by index or case-insensitive name substring; an unknown one is an error listing the adapters', () => {
    assert.strictEqual(selectAdapter(adapters, 1), 'NVIDIA H200');
    assert.strictEqual(selectAdapter(adapters, 'h200'), 'NVIDIA H200');
    assert.strictEqual(selectAdapter(adapters, 'LLVMpipe'), 'llvmpipe (LLVM 15.0.6, 256 bits)');
    assert.throws(() => selectAdapter(adapters, 2), /adapter 2: no such adapter index \(adapters: 0: llvmpipe .*; 1: NVIDIA H200\)/);
    assert.throws(() => selectAdapter(adapters, 'radeon'), /adapter "radeon": no adapter name contains it/);
    assert.throws(() => checkEngineConfig({ adapter: -1 }), /adapter must be an adapter index/);
    assert.throws(() => checkEngineConfig({ adapter: '' }), /adapter must be an adapter index/);
    checkEngineConfig({ adapter: 'h200' });
  });

  it('checkAdapterFits names the sizes and the limit', () => {
    const limits = { maxBufferSize: 1000, maxStorageBufferBindingSize: 500 };
    checkAdapterFits(limits, 'gpu X', { maxBindingBytes: 500, maxBufferBytes: 500 });
    assert.throws(
      () => checkAdapterFits(limits, 'gpu X', { maxBindingBytes: 600, maxBufferBytes: 600, largest: 'tensor emb.weight [300, 1] as f16' }),
      (e: Error) => e instanceof ModelTooLargeError && /does not fit adapter gpu X: it needs a storage binding of 600 bytes \(tensor emb\.weight \[300, 1\] as f16\), the adapter binds at most 500 bytes \(maxStorageBufferBindingSize\)/.test(e.message),
    );
  });

  it('rwkv-flow adapters lists each adapter with its buffer limits', async () => {
    const listed = await listAdapters();
    assert.ok(listed.length >= 1, 'no adapter listed');
    assert.ok(listed.every((a) => a.maxStorageBufferBindingSize > 0 && a.maxBufferSize > 0));
    const r = spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'rwkv-flow'), 'adapters'], { encoding: 'utf8', timeout: 120000 });
    assert.strictEqual(r.status, 0, r.stderr);
    assert.ok(r.stdout.includes(`0: ${listed[0].name}`), r.stdout);
    assert.ok(r.stdout.includes(`maxStorageBufferBindingSize ${listed[0].maxStorageBufferBindingSize} bytes`), r.stdout);
    // The adapter the engine opens by index or by name is that one.
    const be = await createBackend({ model: randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 64, headSize: 64, vocabSize: 16, seed: 2 }), slots: 1, device: 'gpu', adapter: listed[0].name.slice(0, 4).toUpperCase() });
    try {
      assert.ok(be.adapterName.length > 0);
    } finally {
      be.dispose();
    }
  });

  it('a model too large for the adapter is refused before its weights are read, naming the sizes', async () => {
    const [first] = await listAdapters();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'adapter-limits-'));
    try {
      const rows = Math.floor(first.maxStorageBufferBindingSize / (64 * 2)) + 1024;
      const file = path.join(dir, 'huge-vocab.st');
      writeSparseModel(file, rows);
      const need = rows * 64 * 2;
      await assert.rejects(
        createBackend({ model: file, slots: 1, device: 'gpu', adapter: 0 }),
        (e: Error) =>
          e instanceof ModelTooLargeError &&
          e.message.includes(`needs a storage binding of ${need} bytes (tensor emb.weight [${rows}, 64] as f16)`) &&
          e.message.includes(`binds at most ${first.maxStorageBufferBindingSize} bytes`),
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
