// Checks a user's JSON Schema before it reaches the engine, so a typo gives an error naming the
// schema problem at once. Only the schema's structure is checked here, against its own draft's meta-schema
// (the engine's check, linear in the schema's size): compiling the schema (ajv code generation, $ref resolution,
// the grammar) is the engine's job, done in a worker thread with size limits, because ajv.compile on the event
// loop took ~1 s per 1,000 properties and a webhook body can carry 10,000.

import { checkSchemaStructure } from '../../engine/grammar/schema-validator';
import { ParameterError } from './parameter-error';

export function checkJsonSchema(name: string, schema: Record<string, unknown>): void {
  try {
    checkSchemaStructure(schema);
  } catch (err) {
    throw new ParameterError(name, `is not a valid JSON Schema: ${(err as Error).message}`);
  }
}
