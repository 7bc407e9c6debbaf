// ajv for both ends of a schema request: the schema is checked before anything is compiled, and
// the finished output is checked before it is returned. The ajv class is the one of the schema's
// draft (schema-drafts.ts); the schema is checked against that draft's meta-schema (structure),
// while keywords the draft does not define are ignored (vocabulary), as the specification says.
//
// No ajv state outlives a compilation: each schema is compiled by a fresh ajv instance, so an
// `$id` seen before, or a schema refused before, cannot change a verdict. Only the meta-schema
// checkers are kept per draft; they validate the schema as data and register nothing.
//
// ajv's compile takes about a second per thousand properties, so it runs in the compile worker
// (compile-worker.ts), which sends back the validator as ajv "standalone" code; the main thread
// only loads that code (loadSchemaValidator), never compiles a schema.

import Ajv, { type Options } from 'ajv';
import Ajv2019 from 'ajv/dist/2019';
import Ajv2020 from 'ajv/dist/2020';
import AjvDraft04 from 'ajv-draft-04';
import addFormats from 'ajv-formats';
import standaloneCode from 'ajv/dist/standalone';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { LIMITS, overLimit } from './compile-limits';
import { ConstraintError } from './constraint-error';
import { ajvCopy, Draft, draftOf } from './schema-drafts';

type AjvCore = Ajv | Ajv2019 | Ajv2020 | AjvDraft04;

const DRAFT_06_META = 'http://json-schema.org/draft-06/schema#';

/** A new ajv instance of the draft's class, with ajv-formats. */
export function freshAjv(draft: Draft, options: Options = {}): AjvCore {
  const opts: Options = { strict: false, allErrors: true, logger: false, ...options };
  let ajv: AjvCore;
  if (draft === 4) ajv = new AjvDraft04(opts);
  else if (draft === 2019) ajv = new Ajv2019(opts);
  else if (draft === 2020) ajv = new Ajv2020(opts);
  else if (draft === 6) {
    ajv = new Ajv({ ...opts, defaultMeta: opts.meta === false ? undefined : DRAFT_06_META });
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    if (opts.meta !== false) ajv.addMetaSchema(require('ajv/dist/refs/json-schema-draft-06.json'));
  } else ajv = new Ajv(opts);
  addFormats(ajv as Ajv);
  return ajv;
}

const metaCheckers = new Map<Draft, AjvCore>();

/**
 * The cheap up-front check the host nodes make before a request: the schema against its own draft's meta-schema
 * (linear in its size; nothing compiled). A ConstraintError names the problem.
 */
export function checkSchemaStructure(schema: unknown): void {
  const draft = draftOf(schema);
  checkAgainstMetaSchema(ajvCopy(schema, draft), draft);
}

/** Checks a schema (already an ajvCopy) against its draft's meta-schema. */
function checkAgainstMetaSchema(copy: unknown, draft: Draft): void {
  let checker = metaCheckers.get(draft);
  if (!checker) metaCheckers.set(draft, (checker = freshAjv(draft)));
  if (typeof copy === 'boolean') return;
  if (!checker.validateSchema(copy as object))
    throw new ConstraintError(`invalid JSON schema: ${describe(checker.errors).replace(/(^|; )\//g, '$1#/')}`, '#');
}

function describe(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
}

/**
 * Compiles a schema with ajv and returns the validator as standalone CommonJS code; a bad schema
 * is a ConstraintError naming ajv's complaint. Runs in the compile worker.
 */
export function schemaValidatorCode(schema: object | boolean): string {
  if (typeof schema !== 'boolean' && (typeof schema !== 'object' || schema === null || Array.isArray(schema)))
    throw new ConstraintError('jsonSchema must be a JSON Schema object or a boolean', '#');
  const draft = draftOf(schema);
  const copy = ajvCopy(schema, draft) as object | boolean;
  checkAgainstMetaSchema(copy, draft);
  let code: string;
  try {
    const ajv = freshAjv(draft, { code: { source: true }, meta: false, validateSchema: false });
    code = standaloneCode(ajv as Ajv, ajv.compile(copy));
  } catch (e) {
    throw new ConstraintError(`invalid JSON schema: ${(e as Error).message}`, '#');
  }
  if (code.length > LIMITS.validatorCodeChars) throw overLimit('the size of the schema validator (characters)', code.length, LIMITS.validatorCodeChars, '#');
  return code;
}

/** The only modules ajv's standalone code requires: its runtime helpers and the format checks. */
function runtimeRequire(id: string): unknown {
  if (!/^ajv(-formats|-draft-04)?\/dist\/[\w/.-]+$/.test(id)) throw new Error(`schema validator code may not require ${JSON.stringify(id)}`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(id);
}

/** The validator function of code made by schemaValidatorCode. */
export function loadSchemaValidator(code: string): ValidateFunction {
  const mod: { exports: Record<string, unknown> } = { exports: {} };
  new Function('require', 'module', 'exports', code)(runtimeRequire, mod, mod.exports);
  const validate = (mod.exports.default ?? mod.exports) as unknown;
  if (typeof validate !== 'function') throw new ConstraintError('schema validator code did not define a validator', '#');
  return validate as ValidateFunction;
}

/** Parses an output and checks it against the schema. */
export function checkJsonOutput(validate: ValidateFunction, text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ConstraintError(`output is not valid JSON: ${(e as Error).message}`, 'output');
  }
  let ok: boolean;
  try {
    ok = validate(value) === true;
  } catch (e) {
    throw new ConstraintError(`output could not be checked against the schema: ${(e as Error).message}`, 'output');
  }
  if (!ok) throw new ConstraintError(`output does not conform to the schema: ${describe(validate.errors)}`, 'output');
  return value;
}
