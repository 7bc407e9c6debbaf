// One of a few numbers from an operator's environment variable (kernel knobs that benchmarks compare): unset or
// empty gives the default, anything outside the list is refused naming the variable and what it accepts.

/** The value of `name` (`value` as read from the environment) among `allowed`, or `fallback` when unset. */
export function numberChoice<T extends number>(name: string, value: string | undefined, allowed: readonly T[], fallback: T): T {
  if (value === undefined || value === '') return fallback;
  const n = Number(value) as T;
  if (!allowed.includes(n)) throw new Error(`${name}=${value}: give ${allowed.slice(0, -1).join(', ')} or ${allowed[allowed.length - 1]}`);
  return n;
}
