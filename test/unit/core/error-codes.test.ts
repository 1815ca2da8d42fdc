// The error codes are a closed set declared once (server/core/error-codes.ts); docs/API.md documents the same set.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TURN_ERROR_CODES } from '../../../server/core/index.ts';

const API = readFileSync(new URL('../../../docs/API.md', import.meta.url), 'utf8');
const codesIn = (text: string) => new Set([...text.matchAll(/`([a-z]+(?:_[a-z]+)+)`/g)].map((match) => match[1]!));

describe('the error codes', () => {
  it('are the ones docs/API.md lists for a turn and for an image, no more and no fewer', () => {
    const turnRow = API.split('\n').find((line) => line.startsWith('| `error` |') && line.includes('Codes:'))!;
    const imageParagraph = API.slice(API.indexOf('Image error codes:'), API.indexOf('`422` when the prompt is empty'));
    const documented = new Set([...codesIn(turnRow.slice(turnRow.indexOf('Codes:'))), ...codesIn(imageParagraph)]);
    // Flags and fields named beside the codes are not codes.
    for (const other of ['num_predict', 'max_image_pixels']) documented.delete(other);
    expect([...documented].sort()).toEqual([...TURN_ERROR_CODES].sort());
  });
});
