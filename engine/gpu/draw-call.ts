// A draw call (InferenceBackend.runDraws) as both GPU runtimes run it: `steps` decode steps of one token a job,
// each step's rows reduced to their 'top' and drawn on the GPU (rwkv7/top-draw.ts), the drawn row written where the
// next step reads its token, and one read-back of every drawn row at the end. The host's round trip, its parse of the
// tops and its sampling leave the steps in between.

import { MAX_DRAW_STEPS, type DrawJob, type SlotJob } from '../types';
import { TopDrawer, type DrawRow } from '../rwkv7/top-draw';
import type { InputSubPass } from './sub-pass-inputs';

/** Throws on a malformed call before anything is queued (each row's draw is checked by TopDrawer.prepare). */
export function checkDrawCall(jobs: readonly DrawJob[], steps: number): void {
  if (!Number.isInteger(steps) || steps < 1 || steps > MAX_DRAW_STEPS) throw new RangeError(`runDraws: steps must be an integer in 1..${MAX_DRAW_STEPS}, got ${steps}`);
  if (jobs.length === 0) throw new RangeError('runDraws: no jobs');
  jobs.forEach((j, i) => {
    if (!(j.uniforms instanceof Float32Array) || j.uniforms.length !== steps) throw new RangeError(`runDraws: job ${i} has ${j.uniforms?.length} uniforms for ${steps} steps`);
  });
}

/** The jobs of a draw call as the runtime's planner takes them: one token each, output 'top'. */
export function drawSlotJobs(jobs: readonly DrawJob[]): SlotJob[] {
  return jobs.map((j) => ({ slot: j.slot, tokens: [j.token], output: 'top' as const }));
}

/** What a draw call needs of its runtime. */
export interface DrawCallParts {
  device: GPUDevice;
  drawer: TopDrawer;
  /** The runtime's read-back buffer, at least `bytes` long. */
  staging(bytes: number): GPUBuffer;
  /** Writes the sub-pass's inputs: the jobs' tokens, slots and 'top' rows. */
  writeInputs(): void;
  /** One step's forward commands: buffers already submitted before `enc`, and `enc` for what follows them. */
  encodeStep(): { before: GPUCommandBuffer | null; enc: GPUCommandEncoder };
  /** After the last submit, while the read-back is pending (the next call's commands encoded ahead). */
  afterSubmit(): void;
  /** Throws when the device broke meanwhile (the read-back is then garbage). */
  checkAlive(): void;
}

/** Runs the call; `sp` is its one sub-pass, segment i holding job i. Resolves to the drawn rows, step-major. */
export async function runDrawSteps(parts: DrawCallParts, sp: InputSubPass, jobs: readonly DrawJob[], steps: number): Promise<Int32Array> {
  const n = jobs.length;
  // One token a job, in job order: segment i is job i, its token at position i and its logits at row i.
  const rows: DrawRow[] = sp.segments.map((s, i) => {
    if (s.job !== i || s.to - s.from !== 1) throw new Error(`runDraws: segment ${i} holds job ${s.job} (${s.to - s.from} tokens)`);
    return { logitsRow: i, idsAt: i, ...jobs[i].draw };
  });
  const uniforms = new Float32Array(steps * n);
  jobs.forEach((j, i) => j.uniforms.forEach((u, s) => (uniforms[s * n + i] = u)));
  // Checks every row's draw before anything is written: a refused call leaves the buffers as they were.
  parts.drawer.prepare(rows, uniforms, steps);
  parts.writeInputs();
  const bytes = parts.drawer.bytes();
  const staging = parts.staging(bytes);
  for (let s = 0; s < steps; s++) {
    const { before, enc } = parts.encodeStep();
    parts.drawer.encode(enc);
    if (s === steps - 1) parts.drawer.copyOut(enc, staging, 0);
    parts.device.queue.submit(before ? [before, enc.finish()] : [enc.finish()]);
  }
  const done = staging.mapAsync(GPUMapMode.READ, 0, bytes);
  parts.afterSubmit();
  await done;
  try {
    parts.checkAlive();
    return TopDrawer.parse(new Uint32Array(staging.getMappedRange(0, bytes).slice(0)));
  } finally {
    staging.unmap();
  }
}
