// rwkv-flow command line: `info`, `logits` and `generate` over the same engine the workflow nodes use.

import { parseArgs } from 'util';
import { createBackend } from '../engine/backend';
import { createEngine, resolveModelPath } from '../engine/engine-factory';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { listAdapters } from '../engine/gpu/device';
import { describeModel } from '../engine/model-spec';
import { serve, SERVE_OPTIONS, SERVE_USAGE } from './serve';
import { cliPrecision, cliQuantLayers } from './precision-flag';

const USAGE = `usage:
  rwkv-flow adapters
  rwkv-flow info [--model FILE] [--precision P [--quant-layers N]] [--device auto|gpu|cpu] [--adapter N|NAME]
  rwkv-flow logits [--model FILE] --tokens 1,2,3 [--chunk N] [--precision P [--quant-layers N]] [--device auto|gpu|cpu]
  rwkv-flow generate [--model FILE] --prompt TEXT [--max-tokens N] [--temperature T] [--top-p P] [--seed S] [--precision P [--quant-layers N]] [--device auto|gpu|cpu]
${SERVE_USAGE}
\`adapters\` lists the WebGPU adapters with their buffer limits; --adapter picks one by index or name substring.
Without --model, the bundled default model (models/default.st) is used. --precision f16 (default), f32, int8 or
nf4 (GPU only) stores the weights so; --f32 is --precision f32. --quant-layers N with int8 or nf4 quantises only
the first N layers (the later ones stay f16, the head quantised; 0 = all). --device auto (default) runs on the GPU
when the machine has a hardware one, else on the CPU backend.`;

const OPTIONS = {
  model: { type: 'string' },
  tokens: { type: 'string' },
  chunk: { type: 'string' },
  f32: { type: 'boolean' },
  precision: { type: 'string' },
  'quant-layers': { type: 'string' },
  device: { type: 'string' },
  adapter: { type: 'string' },
  prompt: { type: 'string' },
  'max-tokens': { type: 'string' },
  temperature: { type: 'string' },
  'top-p': { type: 'string' },
  seed: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  ...SERVE_OPTIONS,
} as const;

function positiveInt(name: string, v: string | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got '${v}'`);
  return n;
}

function num(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`--${name} must be a number, got '${v}'`);
  return n;
}

export async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });
  const cmd = positionals[0];
  if (values.help || !cmd) {
    process.stdout.write(USAGE + '\n');
    return cmd || values.help ? 0 : 2;
  }
  if (cmd === 'serve') return serve(values);
  if (cmd === 'adapters') {
    const adapters = await listAdapters();
    for (const a of adapters) {
      process.stdout.write(
        `${a.index}: ${a.name} (${a.backend}) maxBufferSize ${a.maxBufferSize} bytes, maxStorageBufferBindingSize ${a.maxStorageBufferBindingSize} bytes\n`,
      );
    }
    if (adapters.length === 0) process.stdout.write('no WebGPU adapter found\n');
    return 0;
  }
  // An index when it is all digits, else part of the adapter's name.
  const adapter = values.adapter === undefined ? undefined : /^\d+$/.test(values.adapter) ? Number(values.adapter) : values.adapter;
  const modelPath = resolveModelPath({ modelPath: values.model });
  const precision = cliPrecision(values);
  const quantLayers = cliQuantLayers(values, precision);
  const device = values.device as 'auto' | 'gpu' | 'cpu' | undefined;
  if (device !== undefined && !['auto', 'gpu', 'cpu'].includes(device)) throw new Error(`--device must be auto, gpu or cpu, got '${device}'`);
  switch (cmd) {
    case 'info': {
      const info = describeModel(loadCheckpoint(modelPath));
      const { vocabMap, ...rest } = info;
      const be = await createBackend({ model: modelPath, slots: 1, precision, quantLayers, device, adapter });
      const out = {
        model: modelPath,
        ...rest,
        reducedVocab: vocabMap ? vocabMap.length : undefined,
        precision,
        quantLayers: quantLayers ?? 0,
        // What the loaded weights take where they run (GPU buffers or the CPU backend's memory).
        weightBytes: be.weightBytes,
        adapter: be.adapterName,
        kernels: be.kernelPath,
      };
      be.dispose();
      process.stdout.write(JSON.stringify(out, null, 2) + '\n');
      return 0;
    }
    case 'logits': {
      if (!values.tokens) throw new Error('logits needs --tokens 1,2,3');
      const tokens = values.tokens.split(',').map((s, i) => {
        const n = Number(s.trim());
        if (!Number.isInteger(n) || n < 0) throw new Error(`--tokens: entry ${i} ('${s}') is not a token id`);
        return n;
      });
      const chunk = positiveInt('chunk', values.chunk, 128);
      const be = await createBackend({ model: modelPath, slots: 1, precision, quantLayers, maxTokens: chunk, maxRows: chunk, device, adapter });
      try {
        const [out] = await be.run([{ slot: 0, tokens, output: 'all' }]);
        const V = be.info.vocabSize;
        const rows = tokens.map((_, i) => Array.from(out!.subarray(i * V, (i + 1) * V)));
        process.stdout.write(JSON.stringify({ logits: rows }) + '\n');
      } finally {
        be.dispose();
      }
      return 0;
    }
    case 'generate': {
      if (values.prompt === undefined) throw new Error('generate needs --prompt TEXT');
      const maxTokens = positiveInt('max-tokens', values['max-tokens'], 200);
      // The CLI user is the operator: the flag sets the cap, and there is no deadline (Ctrl-C stops it).
      const engine = await createEngine({ modelPath: values.model, precision, quantLayers, maxBatch: 1, maxTokensLimit: maxTokens, requestTimeoutMs: 0, device, adapter });
      try {
        for await (const ev of engine.generate({
          prompt: values.prompt,
          maxTokens,
          sampler: {
            temperature: num('temperature', values.temperature),
            topP: num('top-p', values['top-p']),
            seed: num('seed', values.seed),
          },
        })) {
          if (ev.type === 'delta') process.stdout.write(ev.text);
          if (ev.type === 'stop') {
            process.stdout.write('\n');
            process.stderr.write(
              `[${ev.reason}: ${ev.promptTokens} prompt + ${ev.completionTokens} generated tokens in ${(ev.timing.totalMs / 1000).toFixed(1)} s]\n`,
            );
          }
        }
      } finally {
        await (engine as unknown as { close?: () => Promise<void> }).close?.();
      }
      return 0;
    }
    default:
      throw new Error(`unknown command '${cmd}'\n${USAGE}`);
  }
}
