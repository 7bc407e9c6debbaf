// A draw call (InferenceBackend.runDraws) as both GPU runtimes run it: `steps` decode steps of one token a job,
// each step's rows reduced to their 'top' and drawn on the GPU (rwkv7/top-draw.ts), the drawn row written where the
// next step reads its token, and one read-back of every drawn row at the end. The host's round trip, its parse of the
// tops and its sampling leave the steps in between. A call may be continued (continueDraws) before it is read back:
// the next call's steps then queue behind it, and the host reads one call while the GPU runs the next.

import { DRAW_CONTINUATION_STEPS, MAX_DRAW_STEPS, type DrawJob, type SlotJob } from '../types';
import { TopDrawer, type DrawRow } from '../rwkv7/top-draw';
import { writeSubPassInputs, type InputSubPass, type SubPassBuffers } from './sub-pass-inputs';

/** Throws on a malformed call's steps or uniforms (one list of `steps` per job) before anything is queued. */
function checkSteps(call: string, steps: number, uniforms: readonly Float32Array[]): void {
  if (!Number.isInteger(steps) || steps < 1 || steps > MAX_DRAW_STEPS) throw new RangeError(`${call}: steps must be an integer in 1..${MAX_DRAW_STEPS}, got ${steps}`);
  uniforms.forEach((u, i) => {
    if (!(u instanceof Float32Array) || u.length !== steps) throw new RangeError(`${call}: job ${i} has ${u?.length} uniforms for ${steps} steps`);
  });
}

/** The jobs of a draw call as the runtime's planner takes them: one token each, output 'top'. */
function drawSlotJobs(jobs: readonly DrawJob[]): SlotJob[] {
  return jobs.map((j) => ({ slot: j.slot, tokens: [j.token], output: 'top' as const }));
}

/** What a draw call needs of its runtime. */
interface DrawCallParts {
  device: GPUDevice;
  drawer: TopDrawer;
  /** Writes the sub-pass's inputs: the jobs' tokens, slots and 'top' rows. */
  writeInputs(jobs: readonly SlotJob[]): void;
  /** One step's forward commands: buffers already submitted before `enc`, and `enc` for what follows them. */
  encodeStep(): { before: GPUCommandBuffer | null; enc: GPUCommandEncoder };
  /** After the last submit, while the read-back is pending (the next call's commands encoded ahead). */
  afterSubmit(): void;
  /** Throws when the device broke meanwhile (the read-back is then garbage). */
  checkAlive(): void;
}

/** The uniforms of a call, step-major (uniforms[s * n + i]), from each job's own. */
function stepMajorUniforms(perJob: readonly Float32Array[], steps: number): Float32Array {
  const n = perJob.length;
  const out = new Float32Array(steps * n);
  perJob.forEach((u, i) => u.forEach((v, s) => (out[s * n + i] = v)));
  return out;
}

/**
 * Starts a call: checks and uploads its draws (reserving penalty room for `reserve` steps of continuations), writes
 * its inputs and submits its steps. `sp` is its one sub-pass, segment i holding job i. Returns the read-back of the
 * drawn rows (step-major), to await once the caller is ready: `staging` stays mapped-pending until then.
 */
function startDrawCall(parts: DrawCallParts, sp: InputSubPass, jobs: readonly DrawJob[], steps: number, reserve: number, staging: GPUBuffer): () => Promise<Int32Array> {
  // One token a job, in job order: segment i is job i, its token at position i and its logits at row i.
  const rows: DrawRow[] = sp.segments.map((s, i) => {
    if (s.job !== i || s.to - s.from !== 1) throw new Error(`runDraws: segment ${i} holds job ${s.job} (${s.to - s.from} tokens)`);
    return { logitsRow: i, idsAt: i, ...jobs[i].draw };
  });
  // Checks every row's draw before anything is written: a refused call leaves the buffers as they were.
  parts.drawer.prepare(rows, stepMajorUniforms(jobs.map((j) => j.uniforms), steps), steps, reserve);
  parts.writeInputs(drawSlotJobs(jobs));
  return submitSteps(parts, steps, staging);
}

/** Continues the last call's jobs for `steps` more steps (TopDrawer.continueWith), before or after its read-back. */
function continueDrawCall(parts: DrawCallParts, uniforms: readonly Float32Array[], steps: number, staging: GPUBuffer): () => Promise<Int32Array> {
  parts.drawer.continueWith(stepMajorUniforms(uniforms, steps), steps);
  return submitSteps(parts, steps, staging);
}

function submitSteps(parts: DrawCallParts, steps: number, staging: GPUBuffer): () => Promise<Int32Array> {
  const bytes = parts.drawer.bytes();
  if (staging.size < bytes) throw new Error(`draw staging of ${staging.size} bytes is short of ${bytes}`);
  for (let s = 0; s < steps; s++) {
    const { before, enc } = parts.encodeStep();
    parts.drawer.encode(enc);
    if (s === steps - 1) parts.drawer.copyOut(enc, staging, 0);
    parts.device.queue.submit(before ? [before, enc.finish()] : [enc.finish()]);
  }
  const done = staging.mapAsync(GPUMapMode.READ, 0, bytes);
  parts.afterSubmit();
  return async () => {
    await done;
    try {
      parts.checkAlive();
      return TopDrawer.parse(new Uint32Array(staging.getMappedRange(0, bytes).slice(0)));
    } finally {
      staging.unmap();
    }
  };
}

/** Two read-back buffers used in turn: a call and the one continuing it can both be pending. */
class ReadBackPair {
  private readonly buffers: (GPUBuffer | null)[] = [null, null];
  private readonly reads: Promise<unknown>[] = [Promise.resolve(), Promise.resolve()];
  private turn = 0;

  /** The next buffer, of at least `bytes`, once the read it served last is done; `served` is this one's read. */
  async take(device: GPUDevice, bytes: number): Promise<{ buffer: GPUBuffer; served(read: Promise<unknown>): void }> {
    const i = this.turn;
    this.turn = 1 - i;
    const before = this.reads[i];
    let done!: () => void;
    this.reads[i] = new Promise<void>((r) => (done = r));
    await before.catch(() => undefined);
    let b = this.buffers[i];
    if (!b || b.size < bytes) {
      b?.destroy();
      b = this.buffers[i] = device.createBuffer({ label: `draw staging ${i}`, size: Math.max(4096, Math.ceil(bytes / 4096) * 4096), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    }
    return { buffer: b, served: (read) => void read.then(done, done) };
  }

  dispose(): void {
    for (const b of this.buffers) b?.destroy();
  }
}

/** A runtime's own pieces of its draw calls; GpuDraws does the rest, the same for both GPU runtimes. */
export interface DrawRuntime {
  device: GPUDevice;
  /** Its drawer over its 'top' reducer and token-id buffer, made on first use. */
  drawer(): TopDrawer;
  /** The buffers its sub-passes' inputs go to. */
  inputBuffers(): SubPassBuffers;
  /** Runs fn in call order, after every earlier call's read-back. */
  serialize<T>(fn: () => Promise<T>): Promise<T>;
  /** Later calls wait for `p` as well. */
  holdQueue(p: Promise<unknown>): void;
  plan(jobs: SlotJob[]): { passes: InputSubPass[] };
  /** One step of `sp`'s commands (recorded now), and what to do after a call's last submit. */
  stepsOf(sp: InputSubPass): Pick<DrawCallParts, 'encodeStep' | 'afterSubmit'>;
  checkAlive(): void;
  /** Why this runtime cannot draw, or null. */
  refusal(): string | null;
}

/** A queue's tail that waits for `before` and `p`, whichever way each settles. */
export function behindBoth(before: Promise<unknown>, p: Promise<unknown>): Promise<void> {
  return Promise.all([before, p]).then(
    () => undefined,
    () => undefined,
  );
}

/**
 * A GPU runtime's draw calls: InferenceBackend.runDraws and continueDraws over the runtime's own pieces. It counts the
 * runtime's calls and state changes (touch): a call can be continued only while nothing came after it.
 */
export class GpuDraws {
  private rtField: DrawRuntime | null = null;
  private readonly readBacks = new ReadBackPair();
  private serial = 0;
  /**
   * The last draw call: its serial, its jobs, whether its commands were submitted (false: it failed first), and its
   * parts once it started.
   */
  private last: { serial: number; jobs: number; started: Promise<boolean>; parts: () => DrawCallParts | null } | null = null;

  /** `pieces` is asked once, on first use (the runtime's fields are set by then). */
  constructor(private readonly pieces: () => DrawRuntime) {}

  private get rt(): DrawRuntime {
    return (this.rtField ??= this.pieces());
  }

  /** Counts one of the runtime's calls or state changes. */
  touch(): void {
    this.serial++;
  }

  /** InferenceBackend.runDraws. */
  run(jobs: DrawJob[], steps: number): Promise<Int32Array> {
    const rt = this.rt;
    let sp: InputSubPass;
    try {
      checkSteps('runDraws', steps, jobs.map((j) => j.uniforms));
      if (jobs.length === 0) throw new RangeError('runDraws: no jobs');
      const refusal = rt.refusal();
      if (refusal) throw new Error(`runDraws: ${refusal}`);
      const { passes } = rt.plan(drawSlotJobs(jobs));
      if (passes.length !== 1) throw new RangeError(`runDraws: ${jobs.length} rows do not fit one step`);
      sp = passes[0];
    } catch (e) {
      return Promise.reject(e);
    }
    const serial = ++this.serial;
    let submitted!: (ok: boolean) => void;
    const started = new Promise<boolean>((r) => (submitted = r));
    let parts: DrawCallParts | null = null;
    const p = rt.serialize(() =>
      this.onReadBack(steps * jobs.length * 4, (st) => startDrawCall((parts = this.partsFor(sp)), sp, jobs, steps, DRAW_CONTINUATION_STEPS, st), submitted),
    );
    p.then(() => submitted(false), () => submitted(false)); // settles `started` if the call never began (first call wins)
    this.last = { serial, jobs: jobs.length, started, parts: () => parts };
    return p;
  }

  /** InferenceBackend.continueDraws: the last call's jobs, `steps` more steps, queued behind it before its read-back. */
  continue(uniforms: Float32Array[], steps: number): Promise<Int32Array> {
    const last = this.last;
    try {
      if (!last || last.serial !== this.serial) throw new Error('continueDraws: no draw call to continue (a call or a state change came after the last one)');
      checkSteps('continueDraws', steps, uniforms);
      if (uniforms.length !== last.jobs) throw new RangeError(`continueDraws: ${uniforms.length} uniforms lists for the last call's ${last.jobs} jobs`);
    } catch (e) {
      return Promise.reject(e);
    }
    const serial = ++this.serial;
    let submitted!: (ok: boolean) => void;
    const started = new Promise<boolean>((r) => (submitted = r));
    const p = last.started.then((ok) => {
      const parts = last.parts();
      if (!ok || !parts) throw new Error('continueDraws: the call it continues did not start');
      return this.onReadBack(steps * uniforms.length * 4, (st) => continueDrawCall(parts, uniforms, steps, st), submitted);
    });
    p.then(() => submitted(false), () => submitted(false));
    this.rt.holdQueue(p);
    this.last = { serial, jobs: last.jobs, started, parts: last.parts };
    return p;
  }

  /** Starts a call on the next read-back buffer; `submitted` once its commands are submitted or it failed to start. */
  private async onReadBack(bytes: number, start: (staging: GPUBuffer) => () => Promise<Int32Array>, submitted: (ok: boolean) => void): Promise<Int32Array> {
    const { buffer, served } = await this.readBacks.take(this.rt.device, bytes);
    let read: () => Promise<Int32Array>;
    try {
      this.rt.checkAlive();
      read = start(buffer);
    } catch (e) {
      served(Promise.resolve());
      submitted(false);
      throw e;
    }
    submitted(true);
    const p = read();
    served(p);
    return p;
  }

  /** The parts of a call over `sp`, its commands recorded now (in call order). */
  private partsFor(sp: InputSubPass): DrawCallParts {
    const rt = this.rt;
    return {
      device: rt.device,
      drawer: rt.drawer(),
      // Job i's 'top' row is result i: the drawer's own jobs say so too.
      writeInputs: (jobs) => writeSubPassInputs(rt.device.queue, rt.inputBuffers(), sp, jobs, [], jobs.map((_, i) => i)),
      ...rt.stepsOf(sp),
      checkAlive: () => rt.checkAlive(),
    };
  }

  dispose(): void {
    this.readBacks.dispose();
    this.last = null;
  }
}
