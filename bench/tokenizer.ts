// Tokenizer throughput: vocabulary load time, encode and decode speed in MB of UTF-8 per second.
// Run alone with `node dist/bench/tokenizer.js`, or through the bench runner via benchTokenizer().

import { StreamDecoder } from '../engine/stream-decoder';
import { WorldTokenizer } from '../engine/tokenizer';

/** Samples of the kinds of text the nodes see; repeated to the target size. */
const SAMPLES: Record<string, string> = {
  english:
    'The quick brown fox jumps over the lazy dog. User: What is the capital of France?\n\n' +
    'Assistant: The capital of France is Paris, a city known for its museums, cafes and architecture. ',
  code: 'def f(x):\n    return {"a": [1, 2.5e-3, None], "b": x * 2}\n\nfor i in range(10):\n    print(f(i))\n',
  chinese: '你好，世界。今天天气很好。我们一起去公园散步吧，然后吃午饭。',
  mixed: 'emoji 😀🎉👍🏽 ZWJ 👨‍👩‍👧 Привет, мир! 日本語のテキストです。 مرحبا بالعالم {"k": "v"}\n',
};

const TARGET_BYTES = 1 << 20;

function repeatTo(text: string, bytes: number): Uint8Array {
  const one = new TextEncoder().encode(text);
  const out = new Uint8Array(Math.ceil(bytes / one.length) * one.length);
  for (let at = 0; at < out.length; at += one.length) out.set(one, at);
  return out;
}

/** Best of `runs` timings of fn, in seconds. */
function bestSeconds(runs: number, fn: () => void): number {
  let best = Infinity;
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    fn();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  return best;
}

export async function benchTokenizer(): Promise<Record<string, number>> {
  const result: Record<string, number> = {};
  const loadStart = process.hrtime.bigint();
  const tok = WorldTokenizer.fromFile();
  result['tokenizer.load_ms'] = Number(process.hrtime.bigint() - loadStart) / 1e6;

  for (const [name, text] of Object.entries(SAMPLES)) {
    const bytes = repeatTo(text, TARGET_BYTES);
    const mb = bytes.length / 1e6;
    let ids: number[] = [];
    const encodeS = bestSeconds(5, () => {
      ids = tok.encode(bytes);
    });
    const decodeS = bestSeconds(5, () => tok.decode(ids));
    const streamS = bestSeconds(3, () => {
      const sd = new StreamDecoder(tok);
      for (const id of ids) sd.push([id]);
      sd.flush();
    });
    result[`tokenizer.encode_${name}_MBps`] = mb / encodeS;
    result[`tokenizer.decode_${name}_MBps`] = mb / decodeS;
    result[`tokenizer.stream_decode_${name}_MBps`] = mb / streamS;
    result[`tokenizer.bytes_per_token_${name}`] = bytes.length / ids.length;
  }
  return result;
}

if (require.main === module) {
  benchTokenizer().then(
    (r) => {
      for (const [k, v] of Object.entries(r)) console.log(`${k.padEnd(40)} ${v.toFixed(2)}`);
    },
    (e) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}
