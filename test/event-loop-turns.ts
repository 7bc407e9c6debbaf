// For the tests that hold work to the house rule of yielding: how often the event loop turned while it ran.

/** Event-loop turns (setImmediate callbacks) while `work` runs, and its result. */
export async function turnsDuring<T>(work: () => Promise<T>): Promise<{ turns: number; result: T }> {
  let turns = 0;
  let running = true;
  const tick = () => {
    if (!running) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  try {
    const result = await work();
    return { turns, result };
  } finally {
    running = false;
  }
}
