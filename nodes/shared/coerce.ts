// Turning loosely typed host values into typed ones. Node-RED editor fields arrive as strings
// ('' when left empty), msg overrides and n8n parameters as whatever the user put there; each
// helper accepts the sensible forms and throws a ParameterError naming the parameter otherwise.

import { ParameterError } from './parameter-error';

/** undefined, null and whitespace-only strings mean "not set". */
export function isBlank(value: unknown): boolean {
  return value === undefined || value === null || (typeof value === 'string' && value.trim() === '');
}

export function optionalNumber(name: string, value: unknown): number | undefined {
  if (isBlank(value)) return undefined;
  const n = typeof value === 'string' ? Number(value.trim()) : value;
  if (typeof n !== 'number' || !Number.isFinite(n)) {
    throw new ParameterError(name, `must be a number, got ${JSON.stringify(value)}`);
  }
  return n;
}

export function optionalInteger(name: string, value: unknown, min: number): number | undefined {
  const n = optionalNumber(name, value);
  if (n === undefined) return undefined;
  if (!Number.isInteger(n) || n < min) {
    throw new ParameterError(name, `must be an integer ≥ ${min}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/** A string used verbatim (prompts keep their whitespace); blank means not set. */
export function optionalText(name: string, value: unknown): string | undefined {
  if (isBlank(value)) return undefined;
  if (typeof value !== 'string') throw new ParameterError(name, `must be a string, got ${typeof value}`);
  return value;
}

/** A name or path: trimmed; blank means not set. */
export function optionalName(name: string, value: unknown): string | undefined {
  const s = optionalText(name, value);
  return s === undefined ? undefined : s.trim();
}

export function optionalBoolean(name: string, value: unknown): boolean | undefined {
  if (isBlank(value)) return undefined;
  if (typeof value === 'boolean') return value;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new ParameterError(name, `must be true or false, got ${JSON.stringify(value)}`);
}

/** Backslash escapes an editor text field cannot hold literally: \n, \t, \\ and \uXXXX. */
export function decodeEscapes(text: string): string {
  return text.replace(/\\(u[0-9a-fA-F]{4}|[nrt\\])/g, (_, e: string) => {
    if (e[0] === 'u') return String.fromCharCode(parseInt(e.slice(1), 16));
    return ({ n: '\n', r: '\r', t: '\t', '\\': '\\' } as Record<string, string>)[e];
  });
}

/**
 * A list of strings: an array, a JSON array written as text, or one string. A single string
 * from an editor field has its backslash escapes decoded so "\n\nUser:" can be typed.
 */
export function optionalStringList(name: string, value: unknown): string[] | undefined {
  if (isBlank(value)) return undefined;
  let list: unknown = value;
  if (typeof value === 'string') {
    const text = value.trim();
    if (text.startsWith('[')) {
      try {
        list = JSON.parse(text);
      } catch (err) {
        throw new ParameterError(name, `looks like a JSON array but does not parse: ${(err as Error).message}`);
      }
    } else {
      list = [decodeEscapes(value)];
    }
  }
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) {
    throw new ParameterError(name, 'must be a string or an array of strings');
  }
  const strings = list as string[];
  if (strings.some((s) => s.length === 0)) throw new ParameterError(name, 'must not contain empty strings');
  return strings.length ? strings : undefined;
}

/** A JSON object given as an object or as JSON text. */
export function optionalJsonObject(name: string, value: unknown): Record<string, unknown> | undefined {
  if (isBlank(value)) return undefined;
  let parsed: unknown = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value);
    } catch (err) {
      throw new ParameterError(name, `is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ParameterError(name, 'must be a JSON object');
  }
  return parsed as Record<string, unknown>;
}
