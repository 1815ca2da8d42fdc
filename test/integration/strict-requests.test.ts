// The small doors an attacker tries: header values in another case or sent twice, JSON in another charset
// or with bytes that are not UTF-8, and one-line fields holding controls that change how text reads.
import { beforeAll, describe, expect, it } from 'vitest';
import { findInvalidUtf8 } from '../../server/http/errors.ts';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { useEasel } from '../helpers/easel.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { readSse } from '../helpers/sse.ts';

const { fake, easel } = useEasel('all tests');
let id: string;

beforeAll(async () => {
  id = await easel.newConversation();
});

const put = (body: BodyInit, contentType = 'application/json') =>
  fetch(`${easel.url}/api/conversations/${id}/prompt`, { method: 'PUT', headers: { 'content-type': contentType }, body });
const promptNow = async () => ((await (await easel.get(`/api/conversations/${id}`)).json()) as { prompt: string }).prompt;

describe('Sec-Fetch-Site', () => {
  const create = (headers: Record<string, string | string[]>) =>
    rawRequest(easel.url, { method: 'POST', path: '/api/conversations', headers: { 'content-type': 'application/json', ...headers }, body: '{}' });

  it('is compared without regard to case: CROSS-SITE and Same-Site are refused, Same-Origin passes', async () => {
    expect((await create({ 'sec-fetch-site': 'CROSS-SITE' })).status).toBe(403);
    expect((await create({ 'sec-fetch-site': 'Same-Site' })).status).toBe(403);
    expect((await create({ 'sec-fetch-site': 'Same-Origin' })).status).toBe(201);
    expect((await create({ 'sec-fetch-site': ' none ' })).status).toBe(201);
  });

  it('sent twice, or with a value browsers never send, is refused', async () => {
    expect((await create({ 'sec-fetch-site': ['same-origin', 'cross-site'] })).status).toBe(403);
    expect((await create({ 'sec-fetch-site': ['same-origin', 'same-origin'] })).status).toBe(403);
    expect((await create({ 'sec-fetch-site': 'same-origin-ish' })).status).toBe(403);
  });
});

describe('JSON bodies', () => {
  it('a string holding half of a character (an escaped lone surrogate) is refused with 422, never stored as U+FFFD', async () => {
    const response = await put('{"prompt":"a fox \\ud800"}');
    expect(response.status).toBe(422);
    expect(((await response.json()) as { fields: Record<string, string> }).fields.prompt).toBe(
      'The prompt contains half of a character (a lone surrogate, U+D800) at character 7; remove it and try again.',
    );
    const message = await easel.post(`/api/conversations/${id}/messages`, '{"text":"\\udc00 fox"}');
    expect(message.status).toBe(422);
  });

  it('another charset is 415 saying Easel reads UTF-8; utf-8 in any case, and none, pass', async () => {
    const refused = await put(JSON.stringify({ prompt: 'a fox' }), 'application/json; charset=utf-16');
    expect(refused.status).toBe(415);
    expect(((await refused.json()) as { error: string }).error).toBe(
      'The body was sent as "application/json; charset=utf-16": Easel reads JSON only as UTF-8. Send it as UTF-8, with Content-Type: application/json.',
    );
    expect((await put(JSON.stringify({ prompt: 'a fox' }), 'application/json; charset=ISO-8859-1')).status).toBe(415);
    expect((await put(JSON.stringify({ prompt: 'a fox' }), 'application/json; charset=UTF-8')).status).toBe(200);
    expect((await put(JSON.stringify({ prompt: 'a cat' }), 'application/json')).status).toBe(200);
    expect(await promptNow()).toBe('a cat');
  });

  it('bytes that are not UTF-8 are 400 naming the first bad one, and change nothing', async () => {
    const before = await promptNow();
    // {"prompt":"caf\xe9"}: Latin-1's é, byte 15.
    const latin1 = new Uint8Array([...new TextEncoder().encode('{"prompt":"caf'), 0xe9, ...new TextEncoder().encode('"}')]);
    const response = await put(latin1);
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: string }).error).toBe('The body is not valid UTF-8: byte 15 starts no character. Send the JSON as UTF-8.');
    expect(await promptNow()).toBe(before);
    // Real UTF-8 of the same text is taken.
    expect((await put(new TextEncoder().encode('{"prompt":"café"}'))).status).toBe(200);
    expect(await promptNow()).toBe('café');
  });

  it('finds the first sequence that is not UTF-8: overlong forms, surrogates, past U+10FFFF, cut short', () => {
    const at = (...bytes: number[]) => findInvalidUtf8(new Uint8Array([0x61, ...bytes, 0x62]));
    expect(at(0xc3, 0xa9)).toBeUndefined();
    expect(at(0xe2, 0x82, 0xac)).toBeUndefined();
    expect(at(0xf0, 0x9f, 0xa6, 0x8a)).toBeUndefined();
    expect(at(0xc0, 0xaf)).toBe(1); // overlong "/"
    expect(at(0xe0, 0x80, 0xaf)).toBe(1); // overlong, three bytes
    expect(at(0xed, 0xa0, 0x80)).toBe(1); // a UTF-16 surrogate
    expect(at(0xf4, 0x90, 0x80, 0x80)).toBe(1); // past U+10FFFF
    expect(at(0xe2, 0x82)).toBe(1); // cut short before "b"
    expect(at(0x80)).toBe(1); // a continuation byte alone
    expect(at(0xc3, 0xa9, 0xff)).toBe(3);
  });
});

describe('one-line fields', () => {
  const rename = (title: string) =>
    fetch(`${easel.url}/api/conversations/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title }) });

  it.each([
    ['a C1 control (NEL)', 'fox\u0085den', 'A title contains an invisible control character (U+0085) at character 4; remove it and try again.'],
    ['a right-to-left override', 'fox\u202Egnp.exe', 'A title contains a right-to-left override character (U+202E) at character 4; remove it and try again.'],
    ['a first strong isolate', '\u2068fox', 'A title contains a first strong isolate character (U+2068) at character 1; remove it and try again.'],
    ['DEL', 'fox\u007f', 'A title contains an invisible control character (U+007F) at character 4; remove it and try again.'],
    ['a tab', 'fox\tden', 'A title contains an invisible control character (U+0009) at character 4; remove it and try again.'],
    ['a line break', 'fox\nden', 'A title is one line.'],
    ['a line separator (U+2028)', 'fox\u2028den', 'A title is one line.'],
    ['a paragraph separator (U+2029)', 'fox\u2029den', 'A title is one line.'],
    ['half of a character (a lone surrogate)', 'fox\ud800den', 'A title contains half of a character (a lone surrogate, U+D800) at character 4; remove it and try again.'],
  ])('refuses %s in a title with 422 naming it', async (_what, title, message) => {
    const response = await rename(title);
    expect(response.status).toBe(422);
    expect(((await response.json()) as { fields: Record<string, string> }).fields).toEqual({ title: message });
  });

  it('refuses every bidirectional control Unicode lists (Bidi_Control), marks included', async () => {
    for (const control of ['\u061C', '\u200E', '\u200F', '\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069']) {
      const response = await rename(`fox${control}`);
      expect(response.status, control).toBe(422);
    }
    expect(((await (await rename('fox\u200F')).json()) as { fields: Record<string, string> }).fields.title).toBe(
      'A title contains a right-to-left mark character (U+200F) at character 4; remove it and try again.',
    );
  });

  it('trims before it judges: a line break or tab at either end is only white space', async () => {
    const response = await rename('  fox den\n');
    expect(response.status).toBe(200);
    expect(((await response.json()) as { title: string }).title).toBe('fox den');
  });

  it('a title taken from the first message leaves out what a typed title may not hold', async () => {
    const untitled = await easel.newConversation();
    fake.enqueue(scriptReply('Here.', { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 }));
    await readSse(await easel.post(`/api/conversations/${untitled}/messages`, { text: 'fox\u202Egnp.exe \u009B31m den' }));
    const listed = ((await (await easel.get('/api/conversations')).json()) as { conversations: Array<{ id: string; title: string; preview: string }> }).conversations;
    const entry = listed.find((c) => c.id === untitled);
    expect(entry?.title).toBe('foxgnp.exe 31m den');
  });

  it('takes right-to-left text itself, and other invisible characters that change no direction', async () => {
    const response = await rename('שועל אדום fox\u200D\u00A0');
    expect(response.status).toBe(200);
    expect(((await response.json()) as { title: string }).title).toBe('שועל אדום fox\u200D\u00A0'.trim());
  });
});
