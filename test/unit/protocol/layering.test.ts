// The protocol is the ground floor: it imports only its own files and the libraries DEVELOPMENT.md
// allows, never the core, HTTP or an adapter above it.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const PROTOCOL_DIR = join(import.meta.dirname, '../../../server/protocol');
const ALLOWED_PACKAGES = ['zod', 'jsonrepair'];

function importsOf(source: string): string[] {
  return [...source.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s+['"]([^'"]+)['"]/gm)].map((match) => match[1] ?? '');
}

describe('server/protocol layering', () => {
  const files = readdirSync(PROTOCOL_DIR).filter((name) => name.endsWith('.ts'));

  it.each(files)('%s imports only protocol files, zod and jsonrepair', (name) => {
    const specifiers = importsOf(readFileSync(join(PROTOCOL_DIR, name), 'utf8'));
    const outside = specifiers.filter((specifier) =>
      specifier.startsWith('.') ? !/^\.\/[a-z-]+\.ts$/.test(specifier) : !ALLOWED_PACKAGES.includes(specifier),
    );
    expect(outside).toEqual([]);
  });
});
