// Stage reporting for long device runs: with BENCH_PROGRESS=1 each stage goes to stderr with
// the seconds since start, and a deadline watchdog can name the stage a hung run was in.

const start = process.hrtime.bigint();
let currentStage = 'start';

function elapsed(): string {
  return (Number(process.hrtime.bigint() - start) / 1e9).toFixed(1);
}

export function progress(stage: string): void {
  currentStage = stage;
  if (process.env.BENCH_PROGRESS === '1') console.error(`[${elapsed()} s] ${stage}`);
}

/**
 * Ends the process with exit code 3 if it is still running after `seconds`, naming the stage
 * it was in, so a hang reports itself before the device tool's own time limit kills it silently.
 */
export function exitAfter(seconds: number): void {
  if (!(seconds > 0)) throw new Error(`deadline must be a positive number of seconds, got ${seconds}`);
  setTimeout(() => {
    console.error(`deadline of ${seconds} s passed at ${elapsed()} s, during: ${currentStage}`);
    process.exit(3);
  }, seconds * 1000).unref();
}
