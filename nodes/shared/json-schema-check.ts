// Checks a user's JSON Schema before it reaches the engine, so a typo gives an error naming the
// schema problem instead of a grammar-compiler failure deep in a request.

import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020';
import { ParameterError } from './parameter-error';

// Formats are not validated here: the engine turns the schema into a grammar and only the schema's
// structure matters at this point.
const draft07 = new Ajv({ strict: false, validateFormats: false });
const draft2020 = new Ajv2020({ strict: false, validateFormats: false });

export function checkJsonSchema(name: string, schema: Record<string, unknown>): void {
  const uri = typeof schema.$schema === 'string' ? schema.$schema : '';
  const ajv = uri.includes('2020-12') ? draft2020 : draft07;
  try {
    // compile() also resolves $refs, which validateSchema() alone does not.
    ajv.compile(schema);
  } catch (err) {
    throw new ParameterError(name, `is not a valid JSON Schema: ${(err as Error).message}`);
  } finally {
    ajv.removeSchema(schema);
  }
}
