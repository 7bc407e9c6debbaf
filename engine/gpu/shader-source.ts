import * as fs from 'fs';
import * as path from 'path';
import { packageRoot } from '../package-root';

const cache = new Map<string, string>();

function readShader(name: string): string {
  let src = cache.get(name);
  if (src === undefined) {
    src = fs.readFileSync(path.join(packageRoot(), 'shaders', `${name}.wgsl`), 'utf8');
    cache.set(name, src);
  }
  return src;
}

/** A placeholder's value: a number or boolean baked in as a literal, or generated WGSL code (sgtile-code.ts). */
export type ShaderConstant = number | boolean | string;

/**
 * Concatenates WGSL files and fills `{{NAME}}` placeholders. Constants are baked in as text (not override
 * constants) because WGSL sizes private and workgroup arrays only with const expressions.
 */
export function shaderSource(parts: string[], constants: Record<string, ShaderConstant>): string {
  // Directives (`enable`, `requires`, `diagnostic`) must precede every declaration, but each part names
  // the ones it needs: they are hoisted to the top of the module, once each.
  const directives = new Set<string>();
  const bodies = parts.map((name) =>
    readShader(name).replace(/^[ \t]*(?:enable|requires|diagnostic)\b[^;\n]*;[ \t]*$/gm, (line) => {
      directives.add(line.trim());
      return '';
    }),
  );
  const src = [...directives, ...bodies].join('\n');
  return src.replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
    if (!(key in constants)) throw new Error(`shader ${parts.join('+')}: no value for {{${key}}}`);
    return String(constants[key]);
  });
}
