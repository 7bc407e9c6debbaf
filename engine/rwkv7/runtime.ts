// The batched RWKV-7 forward pass on WebGPU. All tokens of one call are flattened into one [T, C] batch
// (each slot's tokens contiguous), so every matrix product runs once over the whole batch whatever mix of
// prefill chunks and single decode tokens it holds; only the WKV recurrence walks each slot's tokens in order.
// A call larger than the scratch buffers is split into sub-passes that are all submitted before the single
// read-back, so a call costs one GPU round trip.

import type { InferenceBackend, ModelInfo, SlotJob, StateSnapshot } from '../types';
import type { GpuContext } from '../gpu/device';
import { bindGroup, BufferRange, createBuffer, Kernel, makeKernel } from '../gpu/kernel';
import type { GpuMatrix, ModelWeights } from './weights';

export interface RuntimeOptions {
  slots: number;
  /** Most tokens in one sub-pass (the prefill chunk budget of a call). */
  maxTokens: number;
  /** Most logits rows in one sub-pass. */
  maxRows: number;
}

const U = () => GPUBufferUsage;

interface Segment {
  job: number;
  slot: number;
  tokens: ArrayLike<number>;
  from: number;
  to: number;
  /** Output row of the segment's first token in the job's result, or -1 per token for no output. */
  outFrom: number;
  outMode: 'last' | 'all' | 'none';
}

interface SubPass {
  segments: Segment[];
  tokens: number;
  rows: number;
}

export class Rwkv7Runtime implements InferenceBackend {
  readonly slots: number;
  readonly stateSize: number;
  private readonly device: GPUDevice;
  private readonly C: number;
  private readonly V: number;
  private readonly F: number;
  private readonly TMAX: number;
  private readonly RMAX: number;
  private readonly layerStride: number;
  private readonly kernels = new Map<string, Kernel>();
  private readonly buf: Record<string, GPUBuffer> = {};
  private readonly layerUniforms: GPUBuffer[] = [];
  private readonly matUniforms = new Map<string, GPUBuffer>();
  private readonly groups = new Map<string, GPUBindGroup>();
  private staging: GPUBuffer | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;

  constructor(
    private readonly gpu: GpuContext,
    readonly info: ModelInfo,
    private readonly weights: ModelWeights,
    opts: RuntimeOptions,
  ) {
    this.device = gpu.device;
    this.slots = opts.slots;
    this.C = info.nEmbd;
    this.V = weights.head.n;
    this.F = info.ffnDim;
    this.TMAX = Math.max(1, opts.maxTokens);
    this.RMAX = Math.max(1, Math.min(opts.maxRows, this.TMAX));
    const H = info.nHead;
    const N = info.headSize;
    this.layerStride = 2 * this.C + H * N * N;
    this.stateSize = info.nLayer * this.layerStride;
    this.allocate();
  }

  // ---- setup --------------------------------------------------------------------------------------------

  private allocate() {
    const { device, C, F, TMAX, RMAX, V } = this;
    const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    const f = (name: string, floats: number) => (this.buf[name] = createBuffer(device, name, floats * 4, S));
    this.buf.batch = createBuffer(device, 'batch', 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    f('ids', TMAX);
    f('tok', TMAX);
    f('jobs', this.slots * 4);
    f('rows', RMAX);
    f('x', TMAX * C);
    f('xn', TMAX * C);
    f('mix', 6 * TMAX * C);
    f('tm', 8 * TMAX * C);
    f('lora', TMAX * this.weights.maxLora);
    f('vl', TMAX * C);
    f('vfirst', TMAX * C);
    f('xx', TMAX * C);
    f('ffk', TMAX * F);
    f('xo', RMAX * C);
    f('logits', RMAX * V);
    f('state', this.slots * this.stateSize);
    f('stateTmp', this.stateSize);
    for (let l = 0; l < this.info.nLayer; l++) {
      const u = createBuffer(device, `layer${l}`, 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      const base = l * this.layerStride;
      device.queue.writeBuffer(u, 0, new Uint32Array([base, base + C, base + this.layerStride - C, l]));
      this.layerUniforms.push(u);
    }
  }

  private kernel(key: string, make: () => Kernel): Kernel {
    let k = this.kernels.get(key);
    if (!k) this.kernels.set(key, (k = make()));
    return k;
  }

  private group(key: string, kernel: Kernel, res: BufferRange[]): GPUBindGroup {
    let g = this.groups.get(key);
    if (!g) this.groups.set(key, (g = bindGroup(this.device, kernel, res)));
    return g;
  }

  private range(name: string, floatOffset: number, floats: number): BufferRange {
    return { buffer: this.buf[name], offset: floatOffset * 4, size: floats * 4 };
  }

  private get wprelude() {
    return this.weights.precision === 'f16' ? 'weights_f16' : 'weights_f32';
  }

  // ---- kernels ------------------------------------------------------------------------------------------

  private matmulKernel(variant: 'mm_vec' | 'mm_gemm') {
    return this.kernel(variant, () =>
      makeKernel(this.device, [this.wprelude, 'mm_common', variant], {}, ['uniform', 'read', 'read', 'rw', 'uniform']),
    );
  }

  /** The per-matrix uniform (shape, activation, flags), made once per use site. */
  private matUniform(key: string, m: GpuMatrix, act: number, flags: number): GPUBuffer {
    let u = this.matUniforms.get(key);
    if (!u) {
      u = createBuffer(this.device, `mat:${key}`, 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      this.device.queue.writeBuffer(u, 0, new Uint32Array([m.k, m.n, act, flags]));
      this.matUniforms.set(key, u);
    }
    return u;
  }

  /** y = act(W x) (+ y), over `rows` rows (tokens, or gathered rows when useR). */
  private matmul(
    pass: GPUComputePassEncoder,
    key: string,
    m: GpuMatrix,
    x: BufferRange,
    y: BufferRange,
    rows: number,
    opts: { act?: number; accum?: boolean; useR?: boolean } = {},
  ) {
    const variant = rows <= 4 ? 'mm_vec' : 'mm_gemm';
    const k = this.matmulKernel(variant);
    const flags = (opts.accum ? 1 : 0) | (opts.useR ? 2 : 0);
    const u = this.matUniform(key, m, opts.act ?? 0, flags);
    pass.setPipeline(k.pipeline);
    pass.setBindGroup(0, this.group(`${variant}:${key}`, k, [this.buf.batch, m.buffer, x, y, u]));
    if (variant === 'mm_vec') pass.dispatchWorkgroups(Math.ceil(m.n / 8), Math.ceil(rows / 4));
    else pass.dispatchWorkgroups(Math.ceil(m.n / 64), Math.ceil(rows / 64));
  }

  private get consts() {
    return {
      C: this.C,
      N: this.info.headSize,
      TMAX: this.TMAX,
      STATE: this.stateSize,
    };
  }

  // ---- the forward pass ---------------------------------------------------------------------------------

  private encodeSubPass(enc: GPUCommandEncoder, sp: SubPass) {
    const { device, C, TMAX, weights } = this;
    const T = sp.tokens;
    const J = sp.segments.length;
    const R = sp.rows;
    const H = this.info.nHead;
    const N = this.info.headSize;
    const cs = this.consts;
    const pass = enc.beginComputePass();
    const xRange = this.range('x', 0, TMAX * C);
    const mixR = (m: number) => this.range('mix', m * TMAX * C, TMAX * C);
    const tmR = (m: number) => this.range('tm', m * TMAX * C, TMAX * C);

    const emb = this.kernel('embed', () =>
      makeKernel(device, [this.wprelude, 'embed'], { C }, ['uniform', 'read', 'read', 'rw']),
    );
    pass.setPipeline(emb.pipeline);
    pass.setBindGroup(0, this.group('embed', emb, [this.buf.batch, weights.emb.buffer, this.buf.ids, this.buf.x]));
    pass.dispatchWorkgroups(Math.ceil(C / 8 / 64), T);

    const ln = this.kernel('ln', () =>
      makeKernel(device, ['layer_norm'], { C, GATHER: false }, ['uniform', 'read', 'read', 'read', 'rw', 'read']),
    );
    const shift = (ffn: boolean) =>
      this.kernel(`shift${ffn}`, () =>
        makeKernel(device, ['token_shift'], { ...cs, M: ffn ? 1 : 6, FFN: ffn }, [
          'uniform', 'uniform', 'read', 'read', 'read', 'read', 'rw',
        ]),
      );
    const save = (ffn: boolean) =>
      this.kernel(`save${ffn}`, () =>
        makeKernel(device, ['save_shift'], { ...cs, FFN: ffn }, ['uniform', 'uniform', 'read', 'read', 'rw']),
      );
    const prep = (first: boolean) =>
      this.kernel(`prep${first}`, () =>
        makeKernel(device, ['head_common', 'rwkv7_prep'], { ...cs, FIRST: first }, ['uniform', 'rw', 'read', 'rw', 'read']),
      );
    const wkv = this.kernel('wkv', () =>
      makeKernel(device, ['head_common', 'rwkv7_wkv'], cs, ['uniform', 'uniform', 'read', 'rw', 'rw']),
    );
    const post = this.kernel('post', () =>
      makeKernel(device, ['head_common', 'rwkv7_post'], cs, ['uniform', 'read', 'read', 'rw']),
    );
    const dispatchLn = (key: string, w: [GPUBuffer, GPUBuffer]) => {
      pass.setPipeline(ln.pipeline);
      pass.setBindGroup(0, this.group(key, ln, [this.buf.batch, this.buf.x, w[0], w[1], this.buf.xn, this.buf.rows]));
      pass.dispatchWorkgroups(T);
    };
    const dispatchShift = (key: string, ffn: boolean, l: number, mixW: GPUBuffer, out: BufferRange) => {
      const k = shift(ffn);
      pass.setPipeline(k.pipeline);
      pass.setBindGroup(
        0,
        this.group(key, k, [this.buf.batch, this.layerUniforms[l], this.buf.tok, this.buf.xn, this.buf.state, mixW, out]),
      );
      pass.dispatchWorkgroups(Math.ceil(C / 64), T);
      const s = save(ffn);
      pass.setPipeline(s.pipeline);
      pass.setBindGroup(
        0,
        this.group(`${key}:save`, s, [this.buf.batch, this.layerUniforms[l], this.buf.jobs, this.buf.xn, this.buf.state]),
      );
      pass.dispatchWorkgroups(Math.ceil(C / 64), J);
    };

    // The LoRA hidden layer is [T, n] with the padded LoRA width n as its row stride.
    const loraR = (n: number) => this.range('lora', 0, TMAX * n);
    weights.layers.forEach((L, l) => {
      const key = `L${l}`;
      dispatchLn(`${key}:ln1`, L.ln1);
      dispatchShift(`${key}:shiftA`, false, l, L.attMix, this.range('mix', 0, 6 * TMAX * C));
      this.matmul(pass, `${key}:r`, L.r, mixR(0), tmR(0), T);
      this.matmul(pass, `${key}:k`, L.k, mixR(2), tmR(2), T);
      this.matmul(pass, `${key}:v`, L.v, mixR(3), tmR(3), T);
      this.matmul(pass, `${key}:w1`, L.w1, mixR(1), loraR(L.w1.n), T, { act: 1 });
      this.matmul(pass, `${key}:w2`, L.w2, loraR(L.w2.k), tmR(1), T);
      this.matmul(pass, `${key}:a1`, L.a1, mixR(4), loraR(L.a1.n), T);
      this.matmul(pass, `${key}:a2`, L.a2, loraR(L.a2.k), tmR(4), T);
      if (L.v1 && L.v2) {
        this.matmul(pass, `${key}:v1`, L.v1, mixR(3), loraR(L.v1.n), T);
        this.matmul(pass, `${key}:v2`, L.v2, loraR(L.v2.k), this.range('vl', 0, TMAX * C), T);
      }
      this.matmul(pass, `${key}:g1`, L.g1, mixR(5), loraR(L.g1.n), T, { act: 2 });
      this.matmul(pass, `${key}:g2`, L.g2, loraR(L.g2.k), tmR(5), T);
      const pk = prep(l === 0);
      pass.setPipeline(pk.pipeline);
      pass.setBindGroup(0, this.group(`${key}:prep`, pk, [this.buf.batch, this.buf.tm, this.buf.vl, this.buf.vfirst, L.prep]));
      pass.dispatchWorkgroups(H, T);
      pass.setPipeline(wkv.pipeline);
      pass.setBindGroup(
        0,
        this.group(`${key}:wkv`, wkv, [this.buf.batch, this.layerUniforms[l], this.buf.jobs, this.buf.tm, this.buf.state]),
      );
      pass.dispatchWorkgroups(H, J);
      pass.setPipeline(post.pipeline);
      pass.setBindGroup(0, this.group(`${key}:post`, post, [this.buf.batch, this.buf.tm, L.post, this.buf.xx]));
      pass.dispatchWorkgroups(H, T);
      this.matmul(pass, `${key}:o`, L.o, this.range('xx', 0, TMAX * C), xRange, T, { accum: true });

      dispatchLn(`${key}:ln2`, L.ln2);
      dispatchShift(`${key}:shiftF`, true, l, L.ffnMix, mixR(0));
      this.matmul(pass, `${key}:fk`, L.ffnK, mixR(0), this.range('ffk', 0, TMAX * this.F), T, { act: 3 });
      this.matmul(pass, `${key}:fv`, L.ffnV, this.range('ffk', 0, TMAX * this.F), xRange, T, { accum: true });
    });

    if (R > 0) {
      const lnG = this.kernel('lnGather', () =>
        makeKernel(device, ['layer_norm'], { C, GATHER: true }, ['uniform', 'read', 'read', 'read', 'rw', 'read']),
      );
      pass.setPipeline(lnG.pipeline);
      pass.setBindGroup(
        0,
        this.group('lnOut', lnG, [this.buf.batch, this.buf.x, weights.lnOut[0], weights.lnOut[1], this.buf.xo, this.buf.rows]),
      );
      pass.dispatchWorkgroups(R);
      this.matmul(pass, 'head', weights.head, this.buf.xo, this.buf.logits, R, { useR: true });
    }
    pass.end();
  }

  // ---- planning -----------------------------------------------------------------------------------------

  private plan(jobs: SlotJob[]): { passes: SubPass[]; rowsPerJob: number[] } {
    const seen = new Set<number>();
    const rowsPerJob: number[] = [];
    jobs.forEach((j, i) => {
      if (!Number.isInteger(j.slot) || j.slot < 0 || j.slot >= this.slots)
        throw new RangeError(`job ${i}: slot ${j.slot} is out of range 0..${this.slots - 1}`);
      if (seen.has(j.slot)) throw new Error(`job ${i}: slot ${j.slot} appears twice in one call`);
      seen.add(j.slot);
      if (j.tokens.length === 0 && j.output !== 'none') throw new Error(`job ${i}: no tokens but output '${j.output}'`);
      for (let t = 0; t < j.tokens.length; t++) {
        const id = j.tokens[t];
        if (!Number.isInteger(id) || id < 0 || id >= this.V)
          throw new RangeError(`job ${i}: token ${id} at position ${t} is outside the model's vocabulary 0..${this.V - 1}`);
      }
      rowsPerJob.push(j.output === 'all' ? j.tokens.length : j.output === 'last' ? 1 : 0);
    });
    const passes: SubPass[] = [];
    let cur: SubPass = { segments: [], tokens: 0, rows: 0 };
    const flush = () => {
      if (cur.segments.length) passes.push(cur);
      cur = { segments: [], tokens: 0, rows: 0 };
    };
    jobs.forEach((j, ji) => {
      let pos = 0;
      const n = j.tokens.length;
      while (pos < n) {
        let room = this.TMAX - cur.tokens;
        if (j.output === 'all') room = Math.min(room, this.RMAX - cur.rows);
        const needsLastRow = j.output === 'last';
        if (room <= 0 || (needsLastRow && pos + room >= n && cur.rows >= this.RMAX)) {
          flush();
          continue;
        }
        const to = Math.min(n, pos + room);
        const outMode = j.output === 'all' ? 'all' : j.output === 'last' && to === n ? 'last' : 'none';
        cur.segments.push({ job: ji, slot: j.slot, tokens: j.tokens, from: pos, to, outFrom: j.output === 'all' ? pos : 0, outMode });
        cur.tokens += to - pos;
        cur.rows += outMode === 'all' ? to - pos : outMode === 'last' ? 1 : 0;
        pos = to;
      }
    });
    flush();
    return { passes, rowsPerJob };
  }

  // ---- InferenceBackend -----------------------------------------------------------------------------------

  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.queue.then(() => {
      this.checkAlive();
      return fn();
    });
    this.queue = p.catch(() => undefined);
    return p;
  }

  private checkAlive() {
    if (this.disposed) throw new Error('the RWKV backend was disposed');
    if (this.gpu.lostReason) throw new Error(this.gpu.lostReason);
    if (this.gpu.error) throw new Error(this.gpu.error);
  }

  run(jobs: SlotJob[]): Promise<(Float32Array | null)[]> {
    let planned: ReturnType<Rwkv7Runtime['plan']>;
    try {
      planned = this.plan(jobs);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.serialize(() => this.execute(jobs, planned.passes, planned.rowsPerJob));
  }

  private async execute(jobs: SlotJob[], passes: SubPass[], rowsPerJob: number[]) {
    const { device, V } = this;
    const totalRows = rowsPerJob.reduce((a, b) => a + b, 0);
    const rowBytes = V * 4;
    const staging = totalRows > 0 ? this.stagingBuffer(totalRows * rowBytes) : null;
    // Where each job's rows land in the staging buffer.
    const jobRowBase: number[] = [];
    let acc = 0;
    for (const r of rowsPerJob) {
      jobRowBase.push(acc);
      acc += r;
    }
    for (const sp of passes) {
      const ids = new Uint32Array(sp.tokens);
      const tok = new Uint32Array(sp.tokens);
      const jobBuf = new Uint32Array(sp.segments.length * 4);
      const rows = new Uint32Array(Math.max(1, sp.rows));
      const copies: [number, number, number][] = []; // [logits row, staging row, count]
      let t = 0;
      let r = 0;
      sp.segments.forEach((s, si) => {
        const start = t;
        for (let i = s.from; i < s.to; i++, t++) {
          ids[t] = s.tokens[i];
          tok[t] = s.slot | (i === s.from ? 0x80000000 : 0);
        }
        jobBuf.set([s.slot, start, s.to - s.from, 0], si * 4);
        if (s.outMode === 'last') {
          rows[r] = t - 1;
          copies.push([r, jobRowBase[s.job], 1]);
          r += 1;
        } else if (s.outMode === 'all') {
          for (let i = start; i < t; i++) rows[r + i - start] = i;
          copies.push([r, jobRowBase[s.job] + s.outFrom, t - start]);
          r += t - start;
        }
      });
      const q = device.queue;
      q.writeBuffer(this.buf.batch, 0, new Uint32Array([sp.tokens, sp.segments.length, sp.rows, 0]));
      q.writeBuffer(this.buf.ids, 0, ids);
      q.writeBuffer(this.buf.tok, 0, tok);
      q.writeBuffer(this.buf.jobs, 0, jobBuf);
      q.writeBuffer(this.buf.rows, 0, rows);
      const enc = device.createCommandEncoder();
      this.encodeSubPass(enc, sp);
      for (const [from, to, count] of copies) {
        enc.copyBufferToBuffer(this.buf.logits, from * rowBytes, staging!, to * rowBytes, count * rowBytes);
      }
      q.submit([enc.finish()]);
    }
    if (!staging) {
      await device.queue.onSubmittedWorkDone();
      this.checkAlive();
      return jobs.map(() => null);
    }
    await staging.mapAsync(GPUMapMode.READ, 0, totalRows * rowBytes);
    try {
      const all = new Float32Array(staging.getMappedRange(0, totalRows * rowBytes));
      return jobs.map((j, i) =>
        rowsPerJob[i] ? all.slice(jobRowBase[i] * V, (jobRowBase[i] + rowsPerJob[i]) * V) : null,
      );
    } finally {
      staging.unmap();
    }
  }

  private stagingBuffer(bytes: number): GPUBuffer {
    if (!this.staging || this.staging.size < bytes) {
      this.staging?.destroy();
      this.staging = this.device.createBuffer({
        label: 'staging',
        size: Math.ceil(bytes / 4096) * 4096,
        usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      });
    }
    return this.staging;
  }

  private checkSlot(slot: number) {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots)
      throw new RangeError(`slot ${slot} is out of range 0..${this.slots - 1}`);
  }

  readState(slot: number): Promise<StateSnapshot> {
    this.checkSlot(slot);
    return this.serialize(async () => {
      const bytes = this.stateSize * 4;
      const staging = this.device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      const enc = this.device.createCommandEncoder();
      enc.copyBufferToBuffer(this.buf.state, slot * bytes, staging, 0, bytes);
      this.device.queue.submit([enc.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      const out = new Float32Array(staging.getMappedRange().slice(0));
      staging.destroy();
      return out;
    });
  }

  writeState(slot: number, state: StateSnapshot): void {
    this.checkSlot(slot);
    this.checkAlive();
    if (state.length !== this.stateSize)
      throw new RangeError(`state has ${state.length} floats; this model's state has ${this.stateSize}`);
    this.device.queue.writeBuffer(this.buf.state, slot * this.stateSize * 4, state.buffer, state.byteOffset, state.byteLength);
  }

  resetState(slot: number): void {
    this.checkSlot(slot);
    this.checkAlive();
    const enc = this.device.createCommandEncoder();
    enc.clearBuffer(this.buf.state, slot * this.stateSize * 4, this.stateSize * 4);
    this.device.queue.submit([enc.finish()]);
  }

  copyState(fromSlot: number, toSlot: number): void {
    this.checkSlot(fromSlot);
    this.checkSlot(toSlot);
    this.checkAlive();
    if (fromSlot === toSlot) return;
    const bytes = this.stateSize * 4;
    const enc = this.device.createCommandEncoder();
    // WebGPU forbids a copy within one buffer, so go through a one-slot scratch buffer.
    enc.copyBufferToBuffer(this.buf.state, fromSlot * bytes, this.buf.stateTmp, 0, bytes);
    enc.copyBufferToBuffer(this.buf.stateTmp, 0, this.buf.state, toSlot * bytes, bytes);
    this.device.queue.submit([enc.finish()]);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const b of Object.values(this.buf)) b.destroy();
    for (const b of this.layerUniforms) b.destroy();
    for (const b of this.matUniforms.values()) b.destroy();
    this.staging?.destroy();
  }
}
