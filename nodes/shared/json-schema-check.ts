// Checks a user's JSON Schema before it reaches the engine, so a typo gives an error naming the
// schema problem at once. Only the schema's structure is checked here, against the draft's meta-schema
// (linear in the schema's size): compiling the schema (ajv code generation, $ref resolution, the grammar) is the
// engine's job, done in a worker thread with size limits, because ajv.compile on the event loop took ~1 s per
// 1,000 properties and a webhook body can carry 10,000.

import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import { ParameterError } from './parameter-error';

const draft07 = new Ajv({ strict: false, validateFormats: false });
const draft2020 = new Ajv2020({ strict: false, validateFormats: false });

export function checkJsonSchema(name: string, schema: Record<string, unknown>): void {
  const uri = typeof schema.$schema === 'string' ? schema.$schema : '';
  const ajv = uri.includes('2020-12') ? draft2020 : draft07;
  let valid: boolean;
  try {
    valid = ajv.validateSchema(schema) as boolean;
  } catch (err) {
    throw new ParameterError(name, `is not a valid JSON Schema: ${(err as Error).message}`);
  }
  if (!valid) throw new ParameterError(name, `is not a valid JSON Schema: ${ajv.errorsText(ajv.errors, { dataVar: 'schema' })}`);
}
