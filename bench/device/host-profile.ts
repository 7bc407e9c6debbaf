// Where a batch-1 decode step's wall time goes on the host: runs steps of a random model of an official shape
// under V8's sampling profiler (node:inspector) and prints the share of wall time in JavaScript, in native
// calls (Dawn), in the collector and idle (waiting for the GPU), with the functions of most self time.
//   node dist/bench/device/host-profile.js [--shape 1.5B] [--seconds 3] [--batch 1] [--out FILE]
// What it answers (issue #12): whether a small model's step is bound by host work or by the GPU.

import * as fs from 'fs';
import { Session } from 'inspector';
import { createBackend } from '../../engine/backend';
import { acquireGpu } from '../../engine/gpu/device';
import { randomRwkv7Checkpoint } from '../../engine/random-model';
import { OFFICIAL_SHAPES } from '../engine';

interface ProfileNode { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
interface Profile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

function post<T>(s: Session, method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) => s.post(method, params ?? {}, (e, r) => (e ? reject(e) : resolve(r as T))));
}

async function main() {
  const arg = (n: string) => { const i = process.argv.indexOf(`--${n}`); return i >= 0 ? process.argv[i + 1] : undefined; };
  const shape = OFFICIAL_SHAPES.find((s) => s.name === (arg('shape') ?? '1.5B'));
  if (!shape) throw new Error(`--shape: one of ${OFFICIAL_SHAPES.map((s) => s.name).join(', ')}`);
  const seconds = Number(arg('seconds') ?? 3);
  const batch = Number(arg('batch') ?? 1);
  const gpu = await acquireGpu();
  const ck = randomRwkv7Checkpoint({ nLayer: shape.nLayer, nEmbd: shape.nEmbd, vocabSize: 65536, dtype: 'f16', seed: 7 });
  const be = await createBackend({ model: ck, slots: Math.max(8, batch), precision: 'f16', maxTokens: 512, maxRows: 64, gpu });
  let n = 0;
  const step = () => be.run(Array.from({ length: batch }, (_, s) => ({ slot: s, tokens: [(n++ * 7919) % 65536], output: 'last' as const })));
  for (let i = 0; i < 20; i++) await step();
  const session = new Session();
  session.connect();
  await post(session, 'Profiler.enable');
  await post(session, 'Profiler.setSamplingInterval', { interval: 100 });
  await post(session, 'Profiler.start');
  const t0 = performance.now();
  let steps = 0;
  while (performance.now() - t0 < seconds * 1000) { await step(); steps++; }
  const wall = performance.now() - t0;
  const { profile } = await post<{ profile: Profile }>(session, 'Profiler.stop');
  session.disconnect();
  // Self time per node from the samples (each sample's delta belongs to the node sampled).
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const byName = new Map<string, number>();
  let idle = 0, gc = 0, program = 0, total = 0;
  for (const node of profile.nodes) {
    const us = self.get(node.id) ?? 0;
    total += us;
    const f = node.callFrame;
    if (f.functionName === '(idle)') idle += us;
    else if (f.functionName === '(garbage collector)') gc += us;
    else if (f.functionName === '(program)') program += us;
    else {
      const where = f.url ? `${f.url.split('/').slice(-2).join('/')}:${f.lineNumber + 1}` : 'native';
      const key = `${f.functionName || '(anonymous)'} ${where}`;
      byName.set(key, (byName.get(key) ?? 0) + us);
    }
  }
  const share = (us: number) => +(us / total).toFixed(3);
  const top = [...byName].sort((a, b) => b[1] - a[1]).slice(0, 25).map(([name, us]) => ({ name, share: share(us), usPerStep: +(us / steps).toFixed(1) }));
  const result = {
    adapter: gpu.adapterName, shape: shape.name, batch, steps, stepMs: +(wall / steps).toFixed(3),
    idleShare: share(idle), gcShare: share(gc), programShare: share(program), jsAndNativeShare: share(total - idle - gc - program),
    hostUsPerStep: +((total - idle) / steps).toFixed(1), top,
  };
  console.log(JSON.stringify(result, null, 1));
  const out = arg('out');
  if (out) fs.writeFileSync(out, JSON.stringify(result, null, 1));
  await be.dispose?.();
  process.exit(0);
}

main().catch((e) => { console.error(e); process.exit(1); });
