// `npm run bench -- --sections wkv` (or `node dist/bench/wkv.js`): the WKV-7 recurrence's kernel variants
// (engine/rwkv7/wkv.ts) on random inputs of the official head shapes, one model layer. For each case every
// variant the device runs is first checked against the reference kernel ('row', the first one) on the same
// input: max |Δ| of the outputs y and of the final states is printed. Then each is timed with timestamp
// queries (bench/device/gpu-span-timer.ts): µs per dispatch, the state's bytes moved per second (decode),
// and µs per token (prefill). The variants the engine picks are marked. A two-kernel variant (chunkT: prep,
// then the chunk-to-chunk scan) is timed as both dispatches together, and checked on its final outputs.
// Cases: decode of 1, 8 and 64 jobs, prefill chunks of 128, 256 and 512 tokens of one job, for the 1.5B shape
// (32 heads of 64) and the 0.1B one (12 heads); a CPU driver runs the 0.1B shape up to 128 tokens unless told.
// --wkv-shapes 0.1B,1.5B chooses shapes; --wkv-cases 'decode J=1,prefill T=128' chooses cases.

import { isCpuDriverName } from '../engine/gpu/capabilities';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { chooseWkv, wkvCandidates, wkvDevice, wkvVariantName, type WkvVariant } from '../engine/rwkv7/wkv';
import { GpuSpanTimer, calibrateRepetitions, median } from './device/gpu-span-timer';
import { progress } from './device/progress';
import { WkvHarness, maxAbsDiff } from './wkv-harness';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

export const WKV_SHAPES = [
  { name: '1.5B', heads: 32 },
  { name: '0.4B', heads: 16 },
  { name: '0.1B', heads: 12 },
];

export const WKV_CASES: { name: string; jobs: number[] }[] = [
  { name: 'decode J=1', jobs: [1] },
  { name: 'decode J=8', jobs: Array(8).fill(1) },
  { name: 'decode J=64', jobs: Array(64).fill(1) },
  { name: 'prefill T=64', jobs: [64] },
  { name: 'prefill T=128', jobs: [128] },
  // Where the chunked variants start to pay, by heads (wkv.ts wkvMidTokens, WKV_CHUNK_TOKENS).
  { name: 'prefill T=256', jobs: [256] },
  { name: 'prefill T=512', jobs: [512] },
];

export interface WkvRow {
  shape: string;
  case: string;
  variant: string;
  /** The engine's default for this case. */
  chosen: boolean;
  yMaxAbsDiff?: number;
  stateMaxAbsDiff?: number;
  us?: number;
  /** Decode: state bytes read and written per second. */
  stateGBps?: number;
  /** Prefill: µs per token of the chunk. */
  usPerToken?: number;
  /** This variant's time ÷ the reference kernel's. */
  speedup?: number;
  error?: string;
}

export async function benchWkv(
  gpu: GpuContext,
  opts: { shapes?: string[]; cases?: string[]; spanSeconds?: number; log?: (s: string) => void } = {},
): Promise<{ device: string; rows: WkvRow[] }> {
  const log = opts.log ?? console.log;
  const N = 64;
  const facts = wkvDevice(gpu, N);
  const variants = wkvCandidates(facts);
  const reference: WkvVariant = { kind: 'row' };
  const spanSeconds = opts.spanSeconds ?? 0.01;
  const timer = new GpuSpanTimer(gpu.device);
  const rows: WkvRow[] = [];
  const shapes = WKV_SHAPES.filter((s) => !opts.shapes || opts.shapes.includes(s.name));
  const cases = WKV_CASES.filter((c) => !opts.cases || opts.cases.includes(c.name));
  log(`wkv: ${timer.method}; variants ${variants.map(wkvVariantName).join(', ')}`);
  try {
    for (const shape of shapes) {
      // One problem per shape, sized for its largest case, so each variant is built once per shape.
      const tokens = Math.max(...cases.map((c) => c.jobs.reduce((a, b) => a + b, 0)));
      const slots = Math.max(...cases.map((c) => c.jobs.length));
      progress(`wkv ${shape.name}: data`);
      const h = new WkvHarness(gpu, { heads: shape.heads, headSize: N, tokens, slots, seed: 7 });
      try {
        for (const c of cases) {
          h.use(c.jobs);
          const longest = Math.max(...c.jobs);
          const chosen = wkvVariantName(chooseWkv(longest, { ...facts, heads: shape.heads }));
          progress(`wkv ${shape.name} ${c.name}: reference`);
          const ref = await h.run(reference);
          let refUs = 0;
          for (const v of [reference, ...variants.filter((x) => wkvVariantName(x) !== 'row')]) {
            const name = wkvVariantName(v);
            const row: WkvRow = { shape: shape.name, case: c.name, variant: name, chosen: name === chosen };
            rows.push(row);
            try {
              progress(`wkv ${shape.name} ${c.name}: ${name} check`);
              const out = await h.run(v);
              row.yMaxAbsDiff = maxAbsDiff(out.y, ref.y);
              row.stateMaxAbsDiff = maxAbsDiff(out.state, ref.state);
              progress(`wkv ${shape.name} ${c.name}: ${name} time`);
              const reps = await calibrateRepetitions(timer, (n) => h.encode(v, n), spanSeconds, 2000);
              // About 30 spans of the same work untimed first, so the GPU's clock is up (bench/warm-up.ts).
              await timer.time(h.encode(v, reps * 30));
              const spans: number[] = [];
              for (let i = 0; i < 3; i++) spans.push((await timer.time(h.encode(v, reps))) / reps);
              const seconds = median(spans);
              row.us = +(seconds * 1e6).toFixed(2);
              if (longest === 1) row.stateGBps = +((2 * c.jobs.length * shape.heads * N * N * 4) / seconds / 1e9).toFixed(1);
              else row.usPerToken = +((seconds * 1e6) / longest).toFixed(3);
              if (name === 'row') refUs = row.us;
              row.speedup = +(refUs / row.us).toFixed(2);
            } catch (e) {
              row.error = (e as Error).message;
            }
            const figures = row.error
              ? `error: ${row.error}`
              : `${String(row.us).padStart(9)} µs  ×${row.speedup!.toFixed(2).padStart(6)}  ` +
                (row.stateGBps !== undefined ? `${row.stateGBps} GB/s state` : `${row.usPerToken} µs/token`) +
                `  max|Δ| y ${row.yMaxAbsDiff!.toExponential(1)} state ${row.stateMaxAbsDiff!.toExponential(1)}`;
            log(`${shape.name} ${c.name.padEnd(13)} ${(name + (row.chosen ? ' *' : '')).padEnd(22)} ${figures}`);
          }
        }
      } finally {
        h.dispose();
      }
    }
  } finally {
    timer.dispose();
  }
  log('* the engine\'s choice (engine/rwkv7/wkv.ts)');
  return { device: gpu.adapterName, rows };
}

/** The command line's shapes and cases; a CPU driver by default runs the 0.1B shape without the 512-token chunk. */
function selection(onGpu: boolean): { shapes?: string[]; cases?: string[] } {
  const shapes = arg('wkv-shapes')?.split(',') ?? (onGpu ? undefined : ['0.1B']);
  const cases = arg('wkv-cases')?.split(',') ?? (onGpu ? undefined : WKV_CASES.map((c) => c.name).filter((n) => !['prefill T=64', 'prefill T=256', 'prefill T=512'].includes(n)));
  return { shapes, cases };
}

export function registerSection(register: (name: string, section: (ctx: { gpu: GpuContext; onGpu: boolean }) => Promise<Record<string, unknown>>) => void): void {
  register('wkv', ({ gpu, onGpu }) => benchWkv(gpu, selection(onGpu)));
}

if (require.main === module) {
  (async () => {
    const gpu = await acquireGpu({ exactTimestamps: true });
    console.log(`adapter: ${gpu.adapterName}`);
    await benchWkv(gpu, selection(!isCpuDriverName(gpu.adapterName)));
    process.exit(0);
  })().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
