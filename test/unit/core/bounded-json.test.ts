// JSON from a file is parsed only once its shape is known to be small; each bound is exact.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseBoundedJson, type JsonBounds } from '../../../server/core/bounded-json.ts';

const BOUNDS: JsonBounds = { maxDepth: 3, maxValues: 20, maxContainers: 6, maxMembers: 3, maxItems: 4, maxStringBytes: 10, maxKeyBytes: 5, maxDistinctKeys: 4 };
const parse = (text: string, bounds: JsonBounds = BOUNDS) => parseBoundedJson(new TextEncoder().encode(text), bounds);
const codeOf = (text: string, bounds?: JsonBounds) => {
  const result = parse(text, bounds);
  return result.ok ? 'ok' : result.error.code;
};

describe('parseBoundedJson', () => {
  it('parses what stays within every bound, each bound exactly reached', () => {
    expect(parse('[[[1]]]')).toEqual({ ok: true, value: [[[1]]] });
    expect(parse('{"a":1,"b":2,"c":3}')).toEqual({ ok: true, value: { a: 1, b: 2, c: 3 } });
    expect(parse('[1,2,3,4]')).toEqual({ ok: true, value: [1, 2, 3, 4] });
    // Ten bytes with its quotes, an escaped quote inside.
    expect(parse('["ab\\"cdef"]')).toEqual({ ok: true, value: ['ab"cdef'] });
    expect(parse('[[{},{}],[{}]]')).toEqual({ ok: true, value: [[{}, {}], [{}]] });
  });

  it('refuses one level, member, item, container or byte past a bound, naming it and where', () => {
    expect(parse('[[[[1]]]]')).toEqual({ ok: false, error: { code: 'too_deep', message: 'nests deeper than 3 levels (at byte 4)' } });
    expect(parse('{"a":1,"b":2,"c":3,"d":4}')).toEqual({ ok: false, error: { code: 'too_many', message: 'holds an object of more than 3 members (at byte 19)' } });
    expect(parse('[1,2,3,4,5]')).toEqual({ ok: false, error: { code: 'too_many', message: 'holds a list of more than 4 items (at byte 9)' } });
    expect(parse('["abcdefghi"]')).toEqual({ ok: false, error: { code: 'too_long', message: 'holds a text of more than 10 bytes (at byte 2)' } });
    expect(parse('[[{},{}],[{}],[]]')).toEqual({ ok: false, error: { code: 'too_many', message: 'holds more than 6 objects and lists (at byte 15)' } });
    expect(codeOf('[[1,2,3],[1,2,3],[1,2,3],[1,2,3]]', { ...BOUNDS, maxValues: 15 })).toBe('too_many');
    expect(codeOf('[[1,2,3],[1,2,3],[1,2,3],[1,2,3]]', { ...BOUNDS, maxValues: 16 })).toBe('ok');
  });

  it('bounds keys apart from other text: their length, and how many different ones there are', () => {
    // Five bytes with the quotes; a value of the same length is no key.
    expect(parse('{"abc":"abcdefgh"}')).toEqual({ ok: true, value: { abc: 'abcdefgh' } });
    expect(parse('{"abcd":1}')).toEqual({ ok: false, error: { code: 'too_long', message: 'holds a key of more than 5 bytes (at byte 2)' } });
    expect(parse('{"abcd" \n :1}')).toEqual({ ok: false, error: { code: 'too_long', message: 'holds a key of more than 5 bytes (at byte 2)' } });
    // The same keys again and again are one shape; a fifth different one is refused.
    expect(codeOf('[{"a":1,"b":2},{"a":1,"b":2},{"c":1,"d":2}]')).toBe('ok');
    expect(parse('[{"a":1,"b":2},{"c":1,"d":2},{"e":1}]')).toEqual({ ok: false, error: { code: 'too_many', message: 'holds more than 4 different keys (at byte 31)' } });
  });

  it('reads what a JSON text can hold around its counts: escapes, white space before a colon, closes with nothing open, commas outside any list', () => {
    // An escaped quote does not end the text: the brackets after it are text, not nesting.
    expect(parse('["\\"[[[[["]')).toEqual({ ok: true, value: ['"[[[[['] });
    // A key is a text followed by a colon, whatever white space stands between (tab, CR, LF, space).
    for (const space of ['\t', '\r', '\n', ' ']) expect(codeOf(`{"abcd"${space}:1}`), JSON.stringify(space)).toBe('too_long');
    // A text at the very end, white space after it, is no key.
    expect(parse('"abcdefgh"  ')).toEqual({ ok: true, value: 'abcdefgh' });
    // A close with nothing open cannot lower the depth below nothing: the nesting after it still counts.
    expect(codeOf(']]][[[[1]]]]')).toBe('too_deep');
    // Commas outside any list are no items of one (and not JSON).
    expect(codeOf('1,1,1,1,1,1')).toBe('malformed');
  });

  it('checks members and items at the deepest level too, each against its own bound', () => {
    expect(codeOf('[[{"a":1,"b":2,"c":3,"d":4}]]')).toBe('too_many');
    expect(codeOf('[[[1,2,3,4,5]]]')).toBe('too_many');
    // An object is held to maxMembers only, a list to maxItems only.
    expect(codeOf('{"a":1,"b":2,"c":3}', { ...BOUNDS, maxMembers: 10, maxItems: 2 })).toBe('ok');
    expect(codeOf('[1,2,3]', { ...BOUNDS, maxMembers: 2, maxItems: 10 })).toBe('ok');
  });

  it('counts values at a container as at a comma, each refusal naming the byte', () => {
    expect(parse('[[],[]]', { ...BOUNDS, maxValues: 3 })).toEqual({ ok: false, error: { code: 'too_many', message: 'holds more than 3 values (at byte 5)' } });
    expect(parse('[1,2,3,4]', { ...BOUNDS, maxValues: 3 })).toEqual({ ok: false, error: { code: 'too_many', message: 'holds more than 3 values (at byte 7)' } });
  });

  it('counts members and items per container: a sibling starts again from one', () => {
    expect(codeOf('[{"a":1,"b":2,"c":3},{"a":1,"b":2,"c":3}]')).toBe('ok');
    expect(codeOf('[[1,2,3,4],[1,2,3,4]]')).toBe('ok');
    expect(codeOf('{"a":[1,2,3,4],"b":1,"c":2}')).toBe('ok');
  });

  it('does not count what is inside a string: brackets, commas and escaped quotes', () => {
    expect(parse('["[[[[,,,,"]')).toEqual({ ok: true, value: ['[[[[,,,,'] });
    expect(parse('["\\\\",[[1]]]')).toEqual({ ok: true, value: ['\\', [[1]]] });
  });

  it('says malformed for bytes that are not UTF-8 or not JSON', () => {
    expect(parseBoundedJson(new Uint8Array([0x22, 0xe9, 0x22]), BOUNDS)).toEqual({ ok: false, error: { code: 'malformed', message: 'is not UTF-8 text' } });
    expect(parse('{"a":')).toEqual({ ok: false, error: { code: 'malformed', message: 'is not valid JSON' } });
    expect(parse(']]]]]]')).toEqual({ ok: false, error: { code: 'malformed', message: 'is not valid JSON' } });
  });

  it('refuses 30 MB of "[" at the first level too many, without building anything', () => {
    const bomb = new Uint8Array(30 * 1024 * 1024).fill(0x5b);
    expect(parseBoundedJson(bomb, { ...BOUNDS, maxDepth: 16, maxContainers: 1e6, maxValues: 1e6 })).toEqual({ ok: false, error: { code: 'too_deep', message: 'nests deeper than 16 levels (at byte 17)' } });
  });

  it('gives what JSON.parse gives for any JSON within the bounds (property)', () => {
    const wide: JsonBounds = { maxDepth: 100, maxValues: 1e6, maxContainers: 1e6, maxMembers: 1e6, maxItems: 1e6, maxStringBytes: 1e6, maxKeyBytes: 1e6, maxDistinctKeys: 1e6 };
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = JSON.stringify(value);
        expect(parse(text, wide)).toEqual({ ok: true, value: JSON.parse(text) });
      }),
      { numRuns: 300 },
    );
  });
});
