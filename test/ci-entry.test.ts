// `.ci/run`, the CI entry point, run against a stand-in `npm` so its own logic is what is tested: it must exit 0
// when every test passed (a grep that finds no "failing" line once ended it with status 1 under pipefail), pass a
// failing stage's status on, and always end with the one summary line.

import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { REPO_ROOT } from './paths';

function runCiEntry(npmOutput: string, npmStatus: number): { status: number | null; lastLine: string; stdout: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-ci-entry-'));
  try {
    fs.mkdirSync(path.join(dir, '.ci'));
    fs.copyFileSync(path.join(REPO_ROOT, '.ci', 'run'), path.join(dir, '.ci', 'run'));
    const bin = path.join(dir, 'bin');
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(dir, 'out.txt'), npmOutput);
    fs.writeFileSync(path.join(bin, 'npm'), `#!/bin/sh\ncat "${path.join(dir, 'out.txt')}"\nexit ${npmStatus}\n`, { mode: 0o755 });
    const r = spawnSync('bash', [path.join(dir, '.ci', 'run')], {
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, RWKV_CI_SKIP_HOSTS: '1' },
      encoding: 'utf8',
    });
    const lines = r.stdout.trim().split('\n');
    return { status: r.status, lastLine: lines[lines.length - 1], stdout: r.stdout };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('.ci/run (CI entry point)', () => {
  it('exits 0 and sums the counts when nothing failed', () => {
    const r = runCiEntry('  golden tests run: 3\n\n  12 passing (3s)\n  2 pending\n', 0);
    assert.strictEqual(r.lastLine, '12 passed, 0 failed, 2 skipped');
    assert.strictEqual(r.status, 0);
  });

  it('passes a failing stage on and still prints the summary line', () => {
    const r = runCiEntry('  10 passing (3s)\n  1 failing\n', 1);
    assert.strictEqual(r.lastLine, '10 passed, 1 failed, 0 skipped');
    assert.strictEqual(r.status, 1);
  });

  it('repeats what failed just before the summary line, after everything else the stages printed', () => {
    const failure = '  1) a suite\n       a test:\n     AssertionError: expected 1 to equal 2\n      at Context.<anonymous> (dist/test/x.js:1:1)\n';
    // The next stage starts with lines that are not indented (the host stage's own output), then its tests.
    const later = `== hosts stage\n> npm run build\n${Array.from({ length: 300 }, (_, i) => `    ✔ a later stage's test ${i}`).join('\n')}`;
    const r = runCiEntry(`  10 passing (3s)\n  1 failing\n\n${failure}\n${later}\n  300 passing (1s)\n`, 1);
    // Everything after the second stage's last test line.
    const tail = r.stdout.slice(r.stdout.lastIndexOf('300 passing'));
    assert.ok(tail.includes('AssertionError: expected 1 to equal 2'), `the last lines do not say what failed:\n${tail}`);
    assert.ok(!tail.includes("a later stage's test") && !tail.includes('at Context'), `the repeat takes more than the failures:\n${tail}`);
    assert.strictEqual(r.lastLine, '310 passed, 1 failed, 0 skipped');
    // Nothing repeated when nothing failed.
    assert.ok(!runCiEntry('  12 passing (3s)\n', 0).stdout.includes('what failed'));
  });
});
