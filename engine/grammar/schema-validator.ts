// ajv (draft 2020-12, with formats) for both ends of a schema request: the schema is checked
// before anything is compiled, and the finished output is checked before it is returned.
// Strict schema mode catches unknown keywords and formats (typos that would otherwise be
// silently ignored); the stylistic strict checks (types, tuples, required) are left off since
// the schemas they flag are still well defined.

import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import type { ErrorObject, ValidateFunction } from 'ajv';
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
    });
    addFormats(ajv);
  }
  return ajv;
}

function describe(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
}

/** Compiles a schema with ajv; a bad schema is a ConstraintError naming ajv's complaint. */
export function compileSchemaValidator(schema: object | boolean): ValidateFunction {
  if (typeof schema !== 'boolean' && (typeof schema !== 'object' || schema === null || Array.isArray(schema)))
    throw new ConstraintError('jsonSchema must be a JSON Schema object', '#');
  try {
    // Compile without caching by $id in the shared instance: two requests may reuse an $id.
    const id = typeof schema === 'object' ? (schema as Record<string, unknown>).$id : undefined;
    if (typeof id === 'string') instance().removeSchema(id);
    const validate = instance().compile(schema);
    // The compiled function keeps working; dropping the cache entry keeps a long-running
    // process from holding every schema it was ever sent.
    instance().removeSchema(schema as object);
    return validate;
  } catch (e) {
    throw new ConstraintError(`invalid JSON schema: ${(e as Error).message}`, '#');
  }
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
