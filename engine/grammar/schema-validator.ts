// ajv (draft 2020-12, with formats) for both ends of a schema request: the schema is checked
// before anything is compiled, and the finished output is checked before it is returned.
// Strict schema mode catches unknown keywords and formats (typos that would otherwise be
// silently ignored); the stylistic strict checks (types, tuples, required) are left off since
// the schemas they flag are still well defined.
//
// ajv's compile takes about a second per thousand properties, so it runs in the compile worker
// (compile-worker.ts), which sends back the validator as ajv "standalone" code; the main thread
// only loads that code (loadSchemaValidator), never compiles a schema.

import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import standaloneCode from 'ajv/dist/standalone';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { LIMITS, overLimit } from './compile-limits';
import { ConstraintError } from './constraint-error';

let ajv: Ajv2020 | undefined;

function instance(): Ajv2020 {
  if (!ajv) {
    ajv = new Ajv2020({
      strict: true,
      strictTypes: false,
      strictTuples: false,
      strictRequired: false,
      allErrors: true,
      logger: false,
      code: { source: true },
    });
    addFormats(ajv);
  }
  return ajv;
}

function describe(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
}

/**
 * Compiles a schema with ajv and returns the validator as standalone CommonJS code; a bad schema
 * is a ConstraintError naming ajv's complaint. Runs in the compile worker.
 */
export function schemaValidatorCode(schema: object | boolean): string {
  if (typeof schema !== 'boolean' && (typeof schema !== 'object' || schema === null || Array.isArray(schema)))
    throw new ConstraintError('jsonSchema must be a JSON Schema object', '#');
  let code: string;
  try {
    // Compile without caching by $id in the shared instance: two requests may reuse an $id.
    const id = typeof schema === 'object' ? (schema as Record<string, unknown>).$id : undefined;
    if (typeof id === 'string') instance().removeSchema(id);
    const validate = instance().compile(schema);
    code = standaloneCode(instance(), validate);
    // Dropping the cache entry keeps a long-running worker from holding every schema it saw.
    instance().removeSchema(schema as object);
  } catch (e) {
    throw new ConstraintError(`invalid JSON schema: ${(e as Error).message}`, '#');
  }
  if (code.length > LIMITS.validatorCodeChars) throw overLimit('the size of the schema validator (characters)', code.length, LIMITS.validatorCodeChars, '#');
  return code;
}

/** The only modules ajv's standalone code requires: its runtime helpers and the format checks. */
function runtimeRequire(id: string): unknown {
  if (!/^ajv(-formats)?\/dist\/[\w/.-]+$/.test(id)) throw new Error(`schema validator code may not require ${JSON.stringify(id)}`);
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
  if (!validate(value)) throw new ConstraintError(`output does not conform to the schema: ${describe(validate.errors)}`, 'output');
  return value;
}
