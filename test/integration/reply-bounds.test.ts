// Exact bounds, through the HTTP API: the longest marker the withholder waits for, the 2000-character
// prompt (from the model and from the user), and the spellings of true and false it repairs.
import { describe, expect, it } from 'vitest';
import { useEasel } from '../helpers/easel.ts';
import { readSse, shownText, type SseEvent } from '../helpers/sse.ts';

const { fake, easel } = useEasel('all tests');

/** One turn in a new conversation, answered by `reply` (sent in one chunk). */
async function turn(reply: string): Promise<{ id: string; events: SseEvent[] }> {
  fake.enqueue({ chunks: [reply] });
  const id = await easel.newConversation();
  const response = await easel.post(`/api/conversations/${id}/messages`, { text: 'a cat' });
  expect(response.status).toBe(200);
  const events = await readSse(response);
  // Every case here is accepted on the first attempt: none asks the model again.
  expect(fake.pendingReplies).toBe(0);
  return { id, events };
}

function first(events: SseEvent[], type: string): Record<string, unknown> {
  const event = events.find((e) => e.type === type);
  if (!event) throw new Error(`no ${type} event in ${events.map((e) => e.type).join(', ')}`);
  return event.data;
}

const metadata = (fields: Record<string, unknown> = {}) =>
  JSON.stringify({ prompt: 'a cat', generate_image: false, steps: 20, cfg: 7, seed: -1, ...fields });

describe('the longest rule the withholder waits for (24 characters; blank lines are free)', () => {
  // Blank lines never count towards the held-back bound (only visible characters do): a `---` followed by
  // any number of them and the JSON is still the delimiter. A rule is a delimiter up to 24 characters.
  it('a `---` line followed by 200 blank lines and the JSON is still the delimiter', async () => {
    const { events } = await turn(`Hi.\n---\n${'\n'.repeat(200)}${metadata()}`);
    expect(shownText(events)).toBe('Hi.');
    expect(first(events, 'done')).toMatchObject({ attempts: 1, repairs: [] });
  });

  it('a rule of 24 dashes (MAX_RULE_CHARS) before the JSON is a delimiter, and never shown', async () => {
    const { events } = await turn(`Hi.\n${'-'.repeat(24)}\n${metadata()}`);
    expect(shownText(events)).toBe('Hi.');
    expect(first(events, 'done')).toMatchObject({ attempts: 1, repairs: ['markdown-rule'] });
  });

  it('a rule of 25 dashes is text: shown, and the JSON after it still withheld and read', async () => {
    const { events } = await turn(`Hi.\n${'-'.repeat(25)}\n${metadata()}`);
    expect(shownText(events)).toBe(`Hi.\n${'-'.repeat(25)}`);
    expect(first(events, 'done')).toMatchObject({ attempts: 1, repairs: ['missing-delimiter'] });
    expect(first(events, 'metadata')).toMatchObject({ prompt: 'a cat' });
  });
});

describe('the 2000-character prompt', () => {
  const exactly = 'p'.repeat(2000);

  it('from the model: 2000 characters are taken as they are', async () => {
    const { id, events } = await turn(`Here.\n---\n${metadata({ prompt: exactly })}`);
    expect(first(events, 'metadata')).toMatchObject({ prompt: exactly, notices: [] });
    expect(first(events, 'done')).toMatchObject({ repairs: [] });
    expect(((await (await easel.get(`/api/conversations/${id}`)).json()) as { prompt: string }).prompt).toBe(exactly);
  });

  it('from the model: 2001 characters are cut to 2000, and the user is told', async () => {
    const { events } = await turn(`Here.\n---\n${metadata({ prompt: `${exactly}q` })}`);
    const event = first(events, 'metadata');
    expect(event.prompt).toBe(exactly);
    expect((event.notices as string[]).join(' ')).toContain('2001 characters long, above the maximum 2000');
    expect(first(events, 'done')).toMatchObject({ repairs: ['clamped'] });
  });

  it('from the user: 2000 characters are saved, 2001 are refused and change nothing (API and page)', async () => {
    const id = await easel.newConversation();
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: exactly })).status).toBe(200);
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: `${exactly}q` })).status).toBe(422);
    const putPage = (prompt: string) =>
      fetch(`${easel.url}/c/${id}/prompt`, { method: 'PUT', headers: { 'sec-fetch-site': 'same-origin' }, body: new URLSearchParams({ prompt }) });
    expect((await putPage(`${exactly}q`)).status).toBe(422);
    const shorter = 'x'.repeat(2000);
    expect((await putPage(shorter)).status).toBe(200);
    expect(((await (await easel.get(`/api/conversations/${id}`)).json()) as { prompt: string }).prompt).toBe(shorter);
  });
});

describe('true and false as strings, in any case', () => {
  for (const [written, value] of [['"True"', true], ['"FALSE"', false], ['" true "', true]] as const) {
    it(`generate_image ${written} is read as ${value}`, async () => {
      const reply = `Here.\n---\n{"prompt": "a cat", "generate_image": ${written}, "steps": 20, "cfg": 7, "seed": -1}`;
      const { events } = await turn(reply);
      expect(first(events, 'metadata')).toMatchObject({ generate_image: value });
      expect(first(events, 'done')).toMatchObject({ attempts: 1, repairs: ['coerced-types'] });
    });
  }
});
