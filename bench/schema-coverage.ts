// `npm run bench -- --sections schema-coverage`: JSON Schema coverage on public data nobody here
// wrote (issue #17). Per suite: how many schemas compile (in the compile worker, as requests do),
// and for each instance whether the grammar's verdict (World-tokenized, through the masks) is
// ajv's: false accepts must be 0. Compile time and per-token mask time percentiles.
//
// The data is not in this repository. Point the bench at checkouts:
//   --suite DIR   JSON-Schema-Test-Suite's tests/ folder (draft2020-12 and draft7 are run)
//   --jsb DIR     guidance-ai/jsonschemabench's root (data/* for JSONSchemaBench, maskbench/data for MaskBench)
//   --limit N     at most N schemas per suite (evenly spread), --sample FILE a fixture of the same
//                 shape as test/fixtures/schema-coverage-sample.json
//   --slowest N   list the N slowest masks per suite (schema, instance, token position, text before it)
//   --generations N  also N random generations through the mask over MaskBench's schemas (over every suite run
//                 when MaskBench is not among them; one per schema, schemas evenly
//                 spread; a random model's logits sampled under the mask, up to 400 tokens, then closed by the
//                 shortest completion), each output judged by the final ajv check: all must pass
// Without any, the committed sample (test/fixtures/) is run.

import * as fs from 'fs';
import * as path from 'path';
import { compileConstraintAsync, canonicalJson, ConstraintError } from '../engine/grammar';
import type { CompiledConstraint } from '../engine/grammar';
import { schemaKeyRank } from '../engine/grammar/schema-to-grammar';
import { WorldTokenizer } from '../engine/tokenizer';
import { sampleConstrained } from '../test/grammar-sampler';

interface Case {
  name: string;
  schema: unknown;
  tests: { data: unknown; valid: boolean }[];
}

/**
 * A case read from its file when its turn comes and dropped after: MaskBench parsed up front
 * kept ~1 GB of JSON alive through the whole run, and every full collection of that heap paused
 * the masks it fell on for hundreds of milliseconds (the slowest masks measured the bench).
 * load() gives null for a file that is not JSON (not a schema a user could send).
 */
interface CaseSource {
  name: string;
  load(): Case | null;
}

function inMemory(cases: Case[]): CaseSource[] {
  return cases.map((c) => ({ name: c.name, load: () => c }));
}

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function readJson(file: string): unknown {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

function jsonFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort().map((f) => path.join(dir, f));
}

function officialSuite(dir: string, draftUrl: string): Case[] {
  const out: Case[] = [];
  for (const file of [...jsonFiles(dir), ...jsonFiles(path.join(dir, 'optional', 'format'))]) {
    // format.json tests formats as annotations; ajv-formats asserts them (optional/format/ applies).
    if (path.basename(file) === 'format.json' && !file.includes('optional')) continue;
    for (const g of readJson(file) as { description: string; schema: unknown; tests: Case['tests'] }[]) {
      const schema = g.schema && typeof g.schema === 'object' && !('$schema' in g.schema) ? { $schema: draftUrl, ...g.schema } : g.schema;
      out.push({ name: `${path.basename(file)} / ${g.description}`, schema, tests: g.tests });
    }
  }
  return out;
}

function maskBench(dir: string): CaseSource[] {
  return jsonFiles(dir).map((f) => ({
    name: path.basename(f),
    load: () => {
      const d = readJson(f) as { schema: unknown; tests?: Case['tests'] };
      return { name: path.basename(f), schema: d.schema, tests: d.tests ?? [] };
    },
  }));
}

function jsonSchemaBench(dir: string): CaseSource[] {
  const out: CaseSource[] = [];
  if (!fs.existsSync(dir)) return out;
  for (const sub of fs.readdirSync(dir).sort())
    for (const f of jsonFiles(path.join(dir, sub))) {
      const name = `${sub}/${path.basename(f)}`;
      out.push({
        name,
        load: () => {
          try {
            return { name, schema: readJson(f), tests: [] };
          } catch {
            return null;
          }
        },
      });
    }
  return out;
}

function spread<T>(list: T[], limit: number | undefined): T[] {
  if (!limit || list.length <= limit) return list;
  return Array.from({ length: limit }, (_, i) => list[Math.floor((i * list.length) / limit)]);
}

function pct(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : NaN;
}

/** Where a mask was computed, for the list of the slowest. */
interface MaskPlace {
  schema: string;
  instance: number;
}

/** The N slowest masks seen, kept as a list trimmed when it doubles (cheap per mask). */
class SlowestMasks {
  private list: { micros: number; place: string }[] = [];
  private floor = 0;
  constructor(private n: number) {}

  add(micros: number, where: MaskPlace, token: number, prefix: () => string): void {
    if (this.n <= 0 || micros < this.floor) return;
    const before = prefix();
    this.list.push({ micros, place: `${where.schema} #${where.instance} token ${token} after …${JSON.stringify(before.slice(-40))}` });
    if (this.list.length >= 2 * this.n) this.trim();
  }

  private trim(): void {
    this.list.sort((a, b) => b.micros - a.micros);
    this.list.length = Math.min(this.list.length, this.n);
    if (this.n > 0 && this.list.length === this.n) this.floor = this.list[this.n - 1].micros;
  }

  top(): string[] {
    this.trim();
    return this.list.map((x) => `${x.micros.toFixed(0)} µs: ${x.place}`);
  }
}

function ajvAccepts(c: CompiledConstraint, value: unknown): boolean {
  try {
    c.validateOutput(JSON.stringify(value));
    return true;
  } catch {
    return false;
  }
}

/**
 * The grammar's verdict on a text, timing each mask: wall time, and this process's CPU time
 * (user + system), which a machine shared with other work inflates far less.
 */
function grammarAccepts(
  c: CompiledConstraint,
  tok: WorldTokenizer,
  text: string,
  maskMicros: number[],
  maskCpuMicros: number[],
  slowest: SlowestMasks,
  where: MaskPlace,
): boolean {
  const m = c.newMatcher();
  const mask = new Uint32Array((tok.vocabSize + 31) >>> 5);
  const ids = tok.encode(text);
  let at = 0;
  const step = () => {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    m.fillMask(mask);
    const micros = Number(process.hrtime.bigint() - t0) / 1000;
    maskMicros.push(micros);
    const cpu = process.cpuUsage(c0);
    maskCpuMicros.push(cpu.user + cpu.system);
    slowest.add(micros, where, at, () => tok.decode(ids.slice(0, at)));
  };
  for (const id of ids) {
    step();
    at++;
    if (!((mask[id >>> 5] >>> (id & 31)) & 1)) return false;
    m.accept(id);
  }
  step();
  return (mask[0] & 1) === 1;
}

async function runSuite(name: string, sources: CaseSource[], tok: WorldTokenizer): Promise<Record<string, unknown>> {
  const slowest = new SlowestMasks(Number(arg('slowest') ?? 0));
  const compileMs: number[] = [];
  const maskMicros: number[] = [];
  const maskCpuMicros: number[] = [];
  let compiled = 0, refused = 0, timeouts = 0, crashes = 0, instances = 0, agree = 0, falseAccepts = 0, falseRejects = 0, pass = 0;
  let suiteDisagrees = 0;
  let schemas = 0;
  const refusals = new Map<string, number>();
  const falseAcceptList: string[] = [];
  for (const source of sources) {
    const c = source.load();
    if (!c) continue;
    schemas++;
    const t0 = performance.now();
    let constraint: CompiledConstraint;
    try {
      if (typeof c.schema !== 'object' && typeof c.schema !== 'boolean') throw new ConstraintError('not a schema');
      constraint = await compileConstraintAsync({ jsonSchema: c.schema as object }, tok);
    } catch (e) {
      if (!(e instanceof ConstraintError)) crashes++;
      else if (/took longer than/.test(e.message)) timeouts++;
      else refused++;
      const why = ((e as Error).message ?? String(e)).replace(/"[^"]*"|'[^']*'|\d+/g, '…').slice(0, 90);
      refusals.set(why, (refusals.get(why) ?? 0) + 1);
      continue;
    } finally {
      compileMs.push(performance.now() - t0);
    }
    compiled++;
    const keyRank = schemaKeyRank(c.schema as Parameters<typeof schemaKeyRank>[0]);
    let allRight = true;
    for (const [k, t] of c.tests.entries()) {
      instances++;
      const want = ajvAccepts(constraint, t.data);
      if (want !== t.valid) suiteDisagrees++;
      let got: boolean;
      try {
        got = grammarAccepts(constraint, tok, canonicalJson(t.data, keyRank), maskMicros, maskCpuMicros, slowest, { schema: c.name, instance: k });
      } catch {
        got = false;
      }
      if (got === want) agree++;
      else if (got) {
        falseAccepts++;
        falseAcceptList.push(`${c.name}: ${JSON.stringify(t.data).slice(0, 80)}`);
      } else falseRejects++;
      if (got !== t.valid) allRight = false;
    }
    if (allRight) pass++;
  }
  compileMs.sort((a, b) => a - b);
  maskMicros.sort((a, b) => a - b);
  maskCpuMicros.sort((a, b) => a - b);
  const r = {
    schemas,
    compiled,
    compileRate: +(compiled / Math.max(1, schemas)).toFixed(3),
    refused,
    timeouts,
    crashes,
    instances,
    agreeWithAjv: agree,
    falseAccepts,
    falseRejects,
    ajvDisagreesWithSuite: suiteDisagrees,
    schemasPassing: pass,
    compileMs: { p50: +pct(compileMs, 0.5).toFixed(1), p95: +pct(compileMs, 0.95).toFixed(1), max: +pct(compileMs, 1).toFixed(1) },
    maskMicros: {
      masks: maskMicros.length,
      p50: +pct(maskMicros, 0.5).toFixed(1),
      p99: +pct(maskMicros, 0.99).toFixed(1),
      max: +pct(maskMicros, 1).toFixed(1),
      over1ms: +(maskMicros.filter((x) => x > 1000).length / Math.max(1, maskMicros.length)).toFixed(4),
    },
    maskCpuMicros: {
      p50: +pct(maskCpuMicros, 0.5).toFixed(1),
      p99: +pct(maskCpuMicros, 0.99).toFixed(1),
      max: +pct(maskCpuMicros, 1).toFixed(1),
      over1ms: +(maskCpuMicros.filter((x) => x > 1000).length / Math.max(1, maskCpuMicros.length)).toFixed(4),
    },
    topRefusals: [...refusals].sort((a, b) => b[1] - a[1]).slice(0, 12).map(([w, n]) => `${n} × ${w}`),
    falseAcceptExamples: falseAcceptList.slice(0, 10),
    slowestMasks: slowest.top(),
  };
  console.log(`schema-coverage ${name}: ${compiled}/${schemas} compiled, ${agree}/${instances} instances agree with ajv, ${falseAccepts} false accepts, ${pass} schemas pass`);
  console.log(
    `schema-coverage ${name}: ${r.maskMicros.masks} masks, wall p50/p99/max ${r.maskMicros.p50}/${r.maskMicros.p99}/${r.maskMicros.max} µs (${(100 * r.maskMicros.over1ms).toFixed(1)}% over 1 ms), ` +
      `CPU ${r.maskCpuMicros.p50}/${r.maskCpuMicros.p99}/${r.maskCpuMicros.max} µs (${(100 * r.maskCpuMicros.over1ms).toFixed(1)}% over 1 ms)`,
  );
  return r;
}

/**
 * Random generations through the mask (the check that what the mask lets through is what the schema
 * accepts): `wanted` schemas that compile, evenly spread, one generation each; every output goes through the
 * final ajv check (validateOutput), as a request's does.
 */
async function runGenerations(name: string, sources: CaseSource[], tok: WorldTokenizer, wanted: number): Promise<Record<string, unknown>> {
  let generated = 0, passed = 0, tokens = 0, forced = 0, closedAtBudget = 0, skipped = 0;
  const failures: string[] = [];
  // More schemas than wanted, as some are refused; stop once `wanted` generated.
  for (const source of spread(sources, Math.ceil(wanted * 1.5))) {
    if (generated >= wanted) break;
    const c = source.load();
    if (!c || (typeof c.schema !== 'object' && typeof c.schema !== 'boolean')) continue;
    let constraint: CompiledConstraint;
    try {
      constraint = await compileConstraintAsync({ jsonSchema: c.schema as object }, tok);
    } catch {
      skipped++;
      continue;
    }
    generated++;
    if (generated % 100 === 0) console.log(`schema-coverage ${name}: ${generated} generations, ${passed} passed so far`);
    const run = sampleConstrained(constraint, tok.vocabSize, { seed: generated, maxTokens: 400, logitScale: 3, eosBias: 4 });
    tokens += run.tokens.length;
    forced += run.forcedSteps;
    if (run.completed) closedAtBudget++;
    const text = tok.decode(run.tokens);
    try {
      constraint.validateOutput(text);
      passed++;
    } catch (e) {
      if (failures.length < 10) failures.push(`${c.name}: ${(e as Error).message.slice(0, 120)} | ${text.slice(0, 120)}`);
    }
  }
  console.log(`schema-coverage ${name}: ${passed}/${generated} random generations pass the final ajv check (${tokens} tokens, ${forced} forced, ${closedAtBudget} closed at the budget)`);
  return { generated, passed, failed: generated - passed, tokens, forcedTokens: forced, closedAtBudget, refusedSchemasSkipped: skipped, failures };
}

export async function benchSchemaCoverage(): Promise<Record<string, unknown>> {
  const tok = WorldTokenizer.bundled();
  const limit = arg('limit') ? Number(arg('limit')) : undefined;
  const suites: [string, CaseSource[]][] = [];
  const suite = arg('suite'), jsb = arg('jsb');
  if (suite) {
    suites.push(['json-schema-test-suite draft2020-12', inMemory(officialSuite(path.join(suite, 'draft2020-12'), 'https://json-schema.org/draft/2020-12/schema'))]);
    suites.push(['json-schema-test-suite draft7', inMemory(officialSuite(path.join(suite, 'draft7'), 'http://json-schema.org/draft-07/schema#'))]);
  }
  if (jsb) {
    suites.push(['maskbench', maskBench(path.join(jsb, 'maskbench', 'data'))]);
    suites.push(['jsonschemabench', jsonSchemaBench(path.join(jsb, 'data'))]);
  }
  if (!suite && !jsb) {
    const sample = arg('sample') ?? path.join(__dirname, '..', '..', 'test', 'fixtures', 'schema-coverage-sample.json');
    const data = readJson(sample) as { suites: Record<string, Case[]> };
    for (const [name, cases] of Object.entries(data.suites)) suites.push([name, inMemory(cases)]);
  }
  const out: Record<string, unknown> = {};
  const generations = Number(arg('generations') ?? 0);
  const generateIn = (name: string) => generations > 0 && (name === 'maskbench' || !suites.some(([n]) => n === 'maskbench'));
  for (const [name, cases] of suites) {
    out[name] = await runSuite(name, spread(cases, limit), tok);
    if (generateIn(name)) out[`${name} random generations`] = await runGenerations(name, cases, tok, generations);
  }
  return out;
}

/** Hook for bench/run.ts (`npm run bench`). */
export function registerSection(register: (name: string, section: () => Promise<Record<string, unknown>>) => void): void {
  register('schema-coverage', () => benchSchemaCoverage());
}

if (require.main === module) {
  benchSchemaCoverage()
    .then((r) => {
      console.log(JSON.stringify(r, null, 1));
      process.exit(0);
    })
    .catch((e) => {
      console.error(e);
      process.exit(1);
    });
}
