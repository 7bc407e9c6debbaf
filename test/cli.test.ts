// The command line as a user pipes it: output must arrive whole even when it is larger than a pipe's
// buffer (64 KiB) and the reader is slower than the writer.

import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as path from 'path';
import { REPO_ROOT } from './paths';

const CLI = path.join(REPO_ROOT, 'bin', 'rwkv-flow');

describe('CLI output through a pipe', function () {
  this.timeout(120000);

  it('logits of several tokens reach a slow pipe reader as whole JSON (> 65k characters)', () => {
    // `sleep 1; cat` reads only after the CLI has written everything and asked to exit, so output that is
    // not flushed before exit is lost.
    const shell = `node ${JSON.stringify(CLI)} logits --tokens 1,2,3,4,5 | (sleep 1; cat)`;
    const r = spawnSync('bash', ['-c', `set -o pipefail; ${shell}`], { encoding: 'utf8', maxBuffer: 64 << 20 });
    assert.strictEqual(r.status, 0, r.stderr);
    assert.ok(r.stdout.length > 65536, `only ${r.stdout.length} characters arrived`);
    const parsed = JSON.parse(r.stdout) as { logits: number[][] };
    assert.strictEqual(parsed.logits.length, 5);
  });
});
