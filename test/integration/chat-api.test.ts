import { afterEach, describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { startTestEasel, useEasel } from '../helpers/easel.ts';
import { metadataJsonSchema } from '../../server/protocol/index.ts';
import { eventTypes, iterateSse, readSse, shownText, type SseEvent } from '../helpers/sse.ts';
import { RESET_MESSAGE } from '../../server/protocol/index.ts';

const READY = { prompt: 'a tabby cat in a wizard hat', generate_image: true, steps: 20, cfg: 7, seed: -1 };
const ASKING = { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 };
/** The answer to the metadata-only request, cut off by its num_predict cap: the ladder goes on. */
const METADATA_CUT = { chunks: ['{"prompt": "a cat in a hat, highly', ' detailed'], doneReason: 'length' };

const { fake, easel } = useEasel('each test');

// Runs before useEasel closes the fakes.
afterEach(() => {
  // Whatever the request, mistral:7b must read the system prompt (Ollama's template can drop it).
  for (const rendered of fake.renderedPrompts()) expect(rendered).toContain('ALWAYS include the delimiter and JSON');
});

async function send(id: string, text: string): Promise<SseEvent[]> {
  const response = await easel.post(`/api/conversations/${id}/messages`, { text });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  return readSse(response);
}

function of(events: SseEvent[], type: string) {
  return events.filter((event) => event.type === type).map((event) => event.data);
}

interface SeenRequest {
  messages: Array<{ role: string; content: string }>;
  format?: unknown;
  options: Record<string, number>;
}

/** The i-th /api/chat request the fake received (negative counts from the end). */
function chatRequest(index: number): SeenRequest {
  const request = fake.chatRequests().at(index);
  if (!request) throw new Error(`no chat request #${index}; got ${fake.chatRequests().length}`);
  return { messages: request.messages ?? [], format: request.format, options: (request.options ?? {}) as Record<string, number> };
}

function systemMessages(request: SeenRequest) {
  return request.messages.filter((message) => message.role === 'system');
}

describe('a clean reply', () => {
  it('streams the text, withholds the metadata, stores prompt and transcript', async () => {
    fake.enqueue({ chunks: ['A cat in a hat!', ' Generating', ' now.\n', '-', '-', '-\n{"prompt": "a tabby', ' cat in a wizard hat", "generate_image": true, "steps": 20, "cfg": 7, "seed": -1}'] });
    const id = await easel.newConversation();
    const events = await send(id, 'a cat in a hat');

    // Ready, but this Easel has no image backend: the reply says so (docs/API.md, image_not_made).
    expect(eventTypes(events)).toEqual(['started', 'delta', 'metadata', 'pane', 'image_not_made', 'done']);
    expect(of(events, 'image_not_made')[0]).toMatchObject({ reason: 'no_backend' });
    expect(events[0]?.data).toEqual({ conversationId: id, turnId: 2, userTurnId: 1, replaces: [] });
    expect(shownText(events)).toBe('A cat in a hat! Generating now.');
    const deltas = of(events, 'delta').map((d) => d.text).join('');
    expect(deltas).not.toMatch(/---|prompt|generate_image|\{/);
    expect(of(events, 'metadata')[0]).toEqual({ ...READY, notices: [] });
    expect(of(events, 'done')[0]).toMatchObject({ attempts: 1, repairs: [], level: 'clean' });

    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as Record<string, any>;
    expect(conversation.prompt).toBe(READY.prompt);
    expect(conversation.turns.map((t: any) => [t.role, t.text])).toEqual([
      ['user', 'a cat in a hat'],
      ['assistant', 'A cat in a hat! Generating now.'],
    ]);
    expect(conversation.turns[1].metadata).toEqual(READY);
  });

  it('sends exactly one system message, first, and keeps the accepted reply in canonical form', async () => {
    fake.enqueue(scriptReply('What kind of cat?', ASKING));
    // The model forgot the delimiter but the JSON is recoverable; its history must still show the right format.
    fake.enqueue('A ginger one, lovely!\n{"prompt": "a ginger cat", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}');
    fake.enqueue(scriptReply('Done.', READY));
    const id = await easel.newConversation();
    await send(id, 'a cat');
    const second = await send(id, 'ginger');
    expect(of(second, 'done')[0]).toMatchObject({ attempts: 1, repairs: ['missing-delimiter'] });
    await send(id, 'go');

    const third = chatRequest(2);
    expect(third.messages[0]!.role).toBe('system');
    expect(systemMessages(third)).toHaveLength(1);
    expect(third.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user', 'assistant', 'user']);
    expect(third.messages[4]?.content).toBe(
      'A ginger one, lovely!\n---\n{"prompt": "a ginger cat", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}',
    );
  });
});

describe('lossless repair', () => {
  const cases: Array<[string, string, string, Partial<typeof READY>]> = [
    ['missing-delimiter', 'Here it is.\n{"prompt": "x", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}', 'Here it is.', {}],
    ['code-fence', 'Here it is.\n---\n```json\n{"prompt": "x", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}\n```', 'Here it is.', {}],
    ['trailing-text', 'Here it is.\n---\n{"prompt": "x", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}\nHope you like it!', 'Here it is.', {}],
    ['json-syntax', "Here it is.\n---\n{'prompt': 'x', 'generate_image': False, 'steps': 20, 'cfg': 7, 'seed': -1,}", 'Here it is.', {}],
    ['coerced-types', 'Here it is.\n---\n{"prompt": "x", "generate_image": "false", "steps": "20", "cfg": "7", "seed": -1}', 'Here it is.', {}],
    ['clamped', 'Here it is.\n---\n{"prompt": "x", "generate_image": false, "steps": 400, "cfg": 7, "seed": -1}', 'Here it is.', { steps: 150 }],
  ];
  for (const [repair, reply, text, changed] of cases) {
    it(`repairs ${repair} without asking the model again`, async () => {
      fake.enqueue(reply);
      const id = await easel.newConversation();
      const events = await send(id, 'a cat');
      expect(fake.chatRequests()).toHaveLength(1);
      expect(shownText(events)).toBe(text);
      expect(of(events, 'metadata')[0]).toMatchObject({ prompt: 'x', generate_image: false, steps: 20, cfg: 7, seed: -1, ...changed });
      expect(of(events, 'done')[0]!.repairs).toContain(repair);
      if (repair === 'clamped') expect((of(events, 'metadata')[0]!.notices as string[]).join(' ')).toMatch(/150/);
    });
  }
});

describe('the recovery ladder', () => {
  it('a format reminder recovers silently (a reply without text goes straight to it)', async () => {
    // Only broken metadata and no words: nothing to keep, so no metadata-only step.
    const broken = '{"prompt": "a cat in a hat", "generate_image": fal';
    fake.enqueue(broken);
    fake.enqueue(scriptReply('Sure, a cat in a hat. What colour?', ASKING));
    const id = await easel.newConversation();
    const events = await send(id, 'a cat in a hat');

    expect(events.map((e) => e.type)).toContain('retry');
    expect(of(events, 'retry')).toEqual([{ attempt: 2, level: 'reminder' }]);
    expect(of(events, 'metadata_retry')).toEqual([]);
    expect(of(events, 'error')).toEqual([]);
    expect(shownText(events)).toBe('Sure, a cat in a hat. What colour?');
    expect(of(events, 'done')[0]).toMatchObject({ attempts: 2, level: 'reminder' });

    const first = chatRequest(0);
    const retry = chatRequest(1);
    expect(systemMessages(first)).toHaveLength(1);
    // context, then the failed reply, then ONE reminder system message, then the question again
    expect(retry.messages.slice(0, -3)).toEqual(first.messages);
    expect(retry.messages.at(-3)).toEqual({ role: 'assistant', content: broken });
    const reminder = retry.messages.at(-2)!;
    expect(reminder.role).toBe('system');
    expect(reminder.content).toMatch(/---/);
    for (const key of ['prompt', 'generate_image', 'steps', 'cfg', 'seed']) expect(reminder.content).toContain(key);
    expect(retry.messages.at(-1)).toEqual(first.messages.at(-1));
    expect(systemMessages(retry)).toHaveLength(2);

    // What mistral:7b actually reads: the system prompt and the reminder must survive Ollama's template.
    const rendered = fake.renderedPrompts()[1]!;
    expect(rendered).toContain('Please end your response with `---`');
    expect(rendered).toContain('ALWAYS include the delimiter and JSON');
    expect(rendered).toContain(`${broken}</s>`);

    // The reminder is request-scoped: the next turn's request holds no reminder.
    fake.enqueue(scriptReply('Orange it is.', READY));
    await send(id, 'orange');
    expect(systemMessages(chatRequest(2))).toHaveLength(1);
  });

  it('the metadata-only step, a reminder, then compaction succeeds, and the context continues from the compacted form', async () => {
    fake.enqueue(scriptReply('What kind of cat?', ASKING));
    fake.enqueue('No JSON here.', METADATA_CUT, 'Nope, prose again.');
    fake.enqueue(JSON.stringify({ prompt: 'a ginger cat in a wizard hat', generate_image: true, steps: 20, cfg: 7, seed: -1 }));
    const id = await easel.newConversation();
    await send(id, 'a cat');
    const events = await send(id, 'ginger, with a wizard hat');

    expect(of(events, 'metadata_retry')).toEqual([{ attempt: 2 }]);
    expect(of(events, 'retry')).toEqual([
      { attempt: 3, level: 'reminder' },
      { attempt: 4, level: 'compaction' },
    ]);
    // The reminder after the failed metadata-only step shows the model its whole first reply.
    expect(chatRequest(3).messages.at(-3)).toEqual({ role: 'assistant', content: 'No JSON here.' });
    expect(shownText(events)).toBe('Nope, prose again.');
    expect(of(events, 'metadata')[0]).toMatchObject({ prompt: 'a ginger cat in a wizard hat', generate_image: true });
    expect(of(events, 'done')[0]).toMatchObject({ attempts: 4, level: 'compaction' });

    const compaction = chatRequest(4);
    expect(compaction.format).toMatchObject({ type: 'object', required: expect.arrayContaining(['prompt', 'generate_image', 'steps', 'cfg', 'seed']) });
    expect(compaction.options).toMatchObject({ temperature: 0 });
    expect(compaction.options.num_predict).toBeGreaterThan(0);
    expect(fake.renderedPrompts()[4]).toMatch(/\[INST\] You are Easel[\s\S]*User wants:[\s\S]*ginger, with a wizard hat\[\/INST\] $/);
    const systems = systemMessages(compaction);
    expect(systems).toHaveLength(2);
    expect(systems[1]!.content).toMatch(/^User wants:/);
    // the user's own words, verbatim, most recent last
    expect(systems[1]!.content.indexOf('a cat')).toBeLessThan(systems[1]!.content.indexOf('ginger, with a wizard hat'));

    fake.enqueue(scriptReply('Here you go.', READY));
    await send(id, 'make it night');
    const after = chatRequest(5);
    expect(systemMessages(after)).toHaveLength(1);
    expect(after.messages.map((m: any) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(after.messages[1]!.content).toContain('ginger, with a wizard hat');
  });

  it('full failure resets the model context but keeps transcript, prompt and settings', async () => {
    fake.enqueue(scriptReply('A cat!', { ...READY, prompt: 'a cat' }));
    fake.enqueue('prose 1', METADATA_CUT, 'prose 2');
    // Grammar-constrained JSON can still fail: cut off by the num_predict cap.
    fake.enqueue({ chunks: ['{"prompt": "a cat in a hat, highly detailed, ', 'intricate'], doneReason: 'length' });
    const id = await easel.newConversation();
    await send(id, 'a cat');
    await easel.put(`/api/conversations/${id}/settings`, { steps: 33 });
    const events = await send(id, 'with a hat');

    expect(of(events, 'reset')).toEqual([{ message: RESET_MESSAGE }]);
    expect(of(events, 'done')[0]).toMatchObject({ attempts: 4, level: 'reset' });
    expect(easel.logs.some((line) => line.includes('ERROR') && line.includes('prose 2'))).toBe(true);

    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as Record<string, any>;
    expect(conversation.prompt).toBe('a cat');
    expect(conversation.settings.steps).toBe(33);
    expect(conversation.turns.map((t: any) => t.text)).toEqual(['a cat', 'A cat!', 'with a hat', RESET_MESSAGE]);

    fake.enqueue(scriptReply('Fresh start!', ASKING));
    await send(id, 'a dog');
    expect(chatRequest(5).messages.map((m: any) => m.role)).toEqual(['system', 'user']);
  });

  it('says so when replies were cut by the length limit', async () => {
    fake.enqueue({ chunks: ['Sure! ', 'A long', ' answer'], doneReason: 'length' });
    fake.enqueue({ chunks: ['Again', ' long'], doneReason: 'length' }, { chunks: ['Still'], doneReason: 'length' });
    fake.enqueue({ chunks: ['{"prompt": "a cat'], doneReason: 'length' });
    const id = await easel.newConversation();
    const events = await send(id, 'a cat');
    expect(events.map((e) => e.type).slice(-3)).toEqual(['reset', 'error', 'done']);
    expect(of(events, 'error')[0]).toMatchObject({ code: 'reply_truncated', message: expect.stringContaining('--num-ctx') });

    fake.enqueue({ chunks: ['Cut but usable.\n---\n{"prompt": "x", "generate_image": false, "steps": 20, "cfg": 7, "seed": -1}'], doneReason: 'length' });
    const accepted = await send(id, 'again');
    expect((of(accepted, 'metadata')[0]!.notices as string[]).join(' ')).toMatch(/cut off by the length limit/);
  });

  it('the retry count starts again every turn', async () => {
    fake.enqueue('no json', JSON.stringify(ASKING));
    fake.enqueue('no json', METADATA_CUT, scriptReply('ok', ASKING));
    const id = await easel.newConversation();
    expect(of(await send(id, 'one'), 'done')[0]).toMatchObject({ attempts: 2, level: 'metadata' });
    expect(of(await send(id, 'two'), 'done')[0]).toMatchObject({ attempts: 3, level: 'reminder' });
  });
});

describe('recovery that keeps what the user read', () => {
  // Odd spacing, a Markdown list, an emoji and a `---` inside prose: all of it must survive untouched.
  const TEXT = 'Sure — a cat in a  hat! 🎩\n\n- What kind of cat?\n- What colour is the hat? --- tell me';

  it('a reply with good text and no JSON costs exactly one constrained call and keeps the text byte for byte', async () => {
    fake.enqueue({ chunks: ['Sure — a cat', ' in a  hat! 🎩\n', '\n- What kind of cat?\n- What', ' colour is the hat? --- tell me'] });
    fake.enqueue(JSON.stringify({ prompt: '', generate_image: false, steps: 25, cfg: 7, seed: -1 }));
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/settings`, { steps: 25 });
    const events = await send(id, 'a cat in a hat');

    expect(fake.chatRequests()).toHaveLength(2);
    // No retry, and nothing streamed after the step began: the bubble keeps exactly what the user read.
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t !== 'delta')).toEqual(['started', 'metadata_retry', 'metadata', 'pane', 'done']);
    expect(types.lastIndexOf('delta')).toBeLessThan(types.indexOf('metadata_retry'));
    const deltas = of(events, 'delta').map((d) => d.text).join('');
    expect(deltas).toBe(TEXT);
    expect(shownText(events)).toBe(TEXT);
    expect(of(events, 'metadata_retry')).toEqual([{ attempt: 2 }]);
    expect(of(events, 'metadata')[0]).toEqual({ prompt: '', generate_image: false, steps: 25, cfg: 7, seed: -1, notices: [] });
    expect(of(events, 'done')[0]).toMatchObject({ attempts: 2, repairs: [], level: 'metadata' });

    // The constrained call: the turn's context, the text as the assistant's message, then the request as
    // the user's turn, with the schema as `format`, temperature 0 and a small num_predict.
    const first = chatRequest(0);
    const constrained = chatRequest(1);
    expect(constrained.format).toEqual(metadataJsonSchema);
    expect(constrained.options).toMatchObject({ temperature: 0 });
    expect(constrained.options.num_predict).toBeGreaterThan(0);
    expect(constrained.options.num_predict).toBeLessThanOrEqual(256);
    expect(constrained.messages.slice(0, -2)).toEqual(first.messages);
    expect(constrained.messages.at(-2)).toEqual({ role: 'assistant', content: TEXT });
    const ask = constrained.messages.at(-1)!;
    expect(ask.role).toBe('user');
    expect(ask.content).toMatch(/ONLY the JSON/);
    expect(ask.content).toContain('steps 25');
    expect(systemMessages(constrained)).toHaveLength(1);
    // What mistral:7b reads: its own text closed by </s>, then the system prompt and the request in the last [INST].
    const rendered = fake.renderedPrompts()[1]!;
    expect(rendered).toContain(`${TEXT}</s>[INST] You are Easel`);
    expect(rendered.endsWith(`${ask.content}[/INST] `)).toBe(true);

    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as Record<string, any>;
    expect(conversation.turns.at(-1)).toMatchObject({ role: 'assistant', text: TEXT, metadata: { steps: 25 } });

    // The model's history holds the kept text in canonical form; no trace of the request for the JSON.
    fake.enqueue(scriptReply('A tabby, then.', ASKING));
    await send(id, 'a tabby');
    const next = chatRequest(2);
    expect(next.messages.at(-2)).toEqual({
      role: 'assistant',
      content: `${TEXT}\n---\n{"prompt": "", "generate_image": false, "steps": 25, "cfg": 7, "seed": -1}`,
    });
    expect(next.messages.some((m) => m.content.includes('ONLY the JSON'))).toBe(false);
  });

  it('broken metadata after good text is asked for alone too, and its repairs are reported', async () => {
    fake.enqueue('Here is your fox.\n---\n{"prompt": "a red fox", "generate_image": tru');
    // The grammar bounds steps but not cfg (a number): the parser clamps it.
    fake.enqueue('{"prompt": "a red fox in snow", "generate_image": true, "steps": 30, "cfg": 45, "seed": 7}');
    const id = await easel.newConversation();
    const events = await send(id, 'a fox');

    expect(shownText(events)).toBe('Here is your fox.');
    expect(of(events, 'metadata')[0]).toMatchObject({ prompt: 'a red fox in snow', cfg: 30, seed: 7 });
    expect(of(events, 'done')[0]).toMatchObject({ attempts: 2, level: 'metadata', repairs: ['clamped'] });
    expect(chatRequest(1).messages.at(-2)).toEqual({ role: 'assistant', content: 'Here is your fox.' });
  });

  it('an Ollama without JSON-schema support refuses the step, and the full reminder follows', async () => {
    fake.enqueue('What colour should the fox be?');
    // Ollama before 0.5 declared `Format string` (v0.4.0 api/types.go:96): a schema fails its binding with a 400.
    fake.enqueue({ chunks: [], errorAfter: { chunks: 0, status: 400, message: 'json: cannot unmarshal object into Go struct field ChatRequest.format of type string' } });
    fake.enqueue(scriptReply('What colour should the fox be?', ASKING));
    const id = await easel.newConversation();
    const events = await send(id, 'a fox');

    expect(of(events, 'metadata_retry')).toEqual([{ attempt: 2 }]);
    expect(of(events, 'retry')).toEqual([{ attempt: 3, level: 'reminder' }]);
    expect(of(events, 'error')).toEqual([]);
    expect(of(events, 'done')[0]).toMatchObject({ attempts: 3, level: 'reminder' });
    expect(shownText(events)).toBe('What colour should the fox be?');
    expect(easel.logs.some((line) => line.includes('the request for the metadata alone failed'))).toBe(true);
  });

  it('a connection lost during the step is not the end either: the full reminder follows', async () => {
    fake.enqueue('What colour should the fox be?');
    fake.enqueue({ chunks: ['{"prompt": ', '"a fox"'], dropAfter: 1 });
    fake.enqueue(scriptReply('Red or grey?', ASKING));
    const id = await easel.newConversation();
    const events = await send(id, 'a fox');

    expect(of(events, 'done')[0]).toMatchObject({ attempts: 3, level: 'reminder' });
    expect(shownText(events)).toBe('Red or grey?');
  });

  it('Stop during the step stores the text the user read', async () => {
    let release!: () => void;
    fake.enqueue('A lighthouse in a storm, got it.');
    const json = JSON.stringify({ prompt: 'a lighthouse', generate_image: false, steps: 20, cfg: 7, seed: -1 });
    fake.enqueue({ chunks: [json.slice(0, 12), json.slice(12)], gate: new Promise<void>((resolve) => (release = resolve)) });
    const id = await easel.newConversation();
    const response = await easel.post(`/api/conversations/${id}/messages`, { text: 'a lighthouse' });
    const events: SseEvent[] = [];
    for await (const event of iterateSse(response.body!)) {
      events.push(event);
      if (event.type === 'metadata_retry') {
        await fake.waitForRequests(2, '/api/chat');
        expect(await (await easel.post(`/api/conversations/${id}/stop`, {})).json()).toEqual({ stopped: true });
      }
    }
    release();
    expect(of(events, 'done')[0]).toMatchObject({ level: 'stopped', attempts: 2 });
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as Record<string, any>;
    expect(conversation.turns.at(-1)).toMatchObject({ role: 'assistant', text: 'A lighthouse in a storm, got it.', status: 'stopped' });
  });
});

describe('what the model is told', () => {
  it('a prompt edit and changed settings reach the model inside the next user message', async () => {
    fake.enqueue(scriptReply('Here is a cat.', READY), scriptReply('Nice edit.', READY), scriptReply('Ok.', READY));
    const id = await easel.newConversation();
    await send(id, 'a cat');
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a black cat under the moon' })).status).toBe(200);
    expect((await easel.put(`/api/conversations/${id}/settings`, { steps: 30, cfg: 6.5 })).status).toBe(200);
    await send(id, 'add stars');

    const request = chatRequest(1);
    const last = request.messages.at(-1)!;
    expect(last.role).toBe('user');
    expect(last.content).toContain('[The user edited the prompt to: "a black cat under the moon"]');
    expect(last.content).toMatch(/\[Current settings:[^\]]*steps 30[^\]]*cfg 6\.5/);
    expect(last.content.endsWith('add stars')).toBe(true);
    expect(systemMessages(request)).toHaveLength(1);

    // told once: the turn after carries no note
    await send(id, 'more stars');
    expect(chatRequest(2).messages.at(-1)!.content).toBe('more stars');
  });
});

describe('failures a person can act on', () => {
  it('Ollama not running: a clear error event with the remedy; a later turn just works', async () => {
    const url = fake.url;
    await fake.close();
    const id = await easel.newConversation();
    const events = await send(id, 'a cat');
    expect(of(events, 'error')[0]).toMatchObject({ code: 'ollama_unreachable', message: expect.stringContaining('ollama serve') });
    expect(of(events, 'done')[0]).toMatchObject({ level: 'error' });
    const health = (await (await easel.get('/api/health')).json()) as any;
    expect(health.ollama).toMatchObject({ reachable: false, modelAvailable: false, remedy: 'ollama serve' });
    // The message names the address where Ollama was expected, so a wrong --ollama-url shows.
    expect(of(events, 'error')[0]!.message).toContain(`Ollama is not reachable at ${url}`);
  });

  it('model not pulled: error names the pull command; the message is kept and Retry does not duplicate it', async () => {
    fake.setModels(['llama3.2:1b']);
    const id = await easel.newConversation();
    const events = await send(id, 'a cat');
    expect(of(events, 'error')[0]).toMatchObject({ code: 'model_not_found', message: expect.stringContaining('ollama pull mistral:7b') });
    const health = (await (await easel.get('/api/health')).json()) as any;
    expect(health.ollama).toMatchObject({ reachable: true, modelAvailable: false, remedy: 'ollama pull mistral:7b' });

    fake.setModels(['mistral:7b']);
    fake.enqueue(scriptReply('A cat!', ASKING));
    await send(id, 'a cat');
    expect(chatRequest(-1).messages.filter((m: any) => m.role === 'user').map((m: any) => m.content)).toEqual(['a cat']);
  });

  it('an error mid-stream ends the turn with an error event, keeping what was shown', async () => {
    fake.enqueue({ chunks: ['Hello', ' there', ' friend'], errorAfter: { chunks: 2, message: 'llama runner process has terminated' } });
    const id = await easel.newConversation();
    const events = await send(id, 'hi');
    expect(of(events, 'error')[0]).toMatchObject({ code: 'ollama_stream_failed', message: expect.stringContaining('llama runner process has terminated') });
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as any;
    expect(conversation.turns[1]).toMatchObject({ status: 'error', text: 'Hello there' });
  });
});

describe('HTTP edge', () => {
  it('answers bad input with readable errors', async () => {
    const id = await easel.newConversation();
    expect((await easel.get('/api/conversations/nope')).status).toBe(404);
    expect((await easel.post('/api/conversations/nope/messages', { text: 'hi' })).status).toBe(404);
    const badJson = await easel.post(`/api/conversations/${id}/messages`, '{"text": ');
    expect(badJson.status).toBe(400);
    expect(((await badJson.json()) as any).error).toMatch(/not valid JSON/);
    expect((await easel.post(`/api/conversations/${id}/messages`, { text: '   ' })).status).toBe(422);
    const big = await easel.post(`/api/conversations/${id}/messages`, { text: 'x'.repeat(70_000) });
    expect(big.status).toBe(413);
    const settings = await easel.put(`/api/conversations/${id}/settings`, { steps: 0, cfg: 'high', colour: 'red' });
    expect(settings.status).toBe(422);
    const body = (await settings.json()) as any;
    expect(Object.keys(body.fields).sort()).toEqual(['cfg', 'colour', 'steps']);
    expect(body.fields.steps).toMatch(/at least 1/);
    // nothing changed
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as any;
    expect(conversation.settings.steps).toBe(20);
    expect((await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'x'.repeat(2001) })).status).toBe(422);
  });

  it('a second message while a reply streams gets 409', async () => {
    let release!: () => void;
    fake.enqueue({ chunks: ['Thinking', ' hard', '\n---\n{"prompt":"","generate_image":false,"steps":20,"cfg":7,"seed":-1}'], gate: new Promise<void>((r) => (release = r)) });
    const id = await easel.newConversation();
    const first = await easel.post(`/api/conversations/${id}/messages`, { text: 'one' });
    await fake.waitForRequests(1);
    const second = await easel.post(`/api/conversations/${id}/messages`, { text: 'two' });
    expect(second.status).toBe(409);
    expect(((await second.json()) as any).error).toMatch(/still being written/);
    release();
    expect(shownText(await readSse(first))).toBe('Thinking hard');
  });

  it('a client that hangs up does not stop the reply: the server finishes it and stores it whole', async () => {
    fake.enqueue(scriptReply(Array.from({ length: 40 }, (_, i) => `word${i}`).join(' '), { prompt: 'a story', generate_image: false, steps: 20, cfg: 7, seed: -1 }, { delayMs: 5 }));
    const id = await easel.newConversation();
    const controller = new AbortController();
    const response = await easel.post(`/api/conversations/${id}/messages`, { text: 'tell me a long story' }, { signal: controller.signal });
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    await expect.poll(async () => ((await (await easel.get(`/api/conversations/${id}`)).json()) as any).busy, { timeout: 5000 }).toBe(false);
    expect(fake.hangups).toBe(0);
    const conversation = (await (await easel.get(`/api/conversations/${id}`)).json()) as any;
    expect(conversation.turns[1]).toMatchObject({ status: 'ok', text: Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ') });
  });

  it('POST /stop aborts a running reply', async () => {
    fake.enqueue({ chunks: Array.from({ length: 200 }, (_, i) => `word${i} `), delayMs: 20 });
    const id = await easel.newConversation();
    const response = await easel.post(`/api/conversations/${id}/messages`, { text: 'long' });
    await fake.waitForRequests(1);
    const stop = await easel.post(`/api/conversations/${id}/stop`, {});
    expect(await stop.json()).toEqual({ stopped: true });
    const events = await readSse(response);
    expect(of(events, 'done')[0]).toMatchObject({ level: 'stopped' });
    await fake.waitForHangup();
    expect(((await (await easel.post(`/api/conversations/${id}/stop`, {})).json()) as any).stopped).toBe(false);
  });
});

describe('the working context stays within --num-ctx', () => {
  it('drops the oldest turns, never the system prompt or the latest message, and passes num_ctx to Ollama', async () => {
    const small = await startTestEasel({ ollamaUrl: fake.url, flags: ['--num-ctx', '2048'] });
    try {
      const id = await small.newConversation();
      const long = (n: number) => `message ${n}: ${'a very detailed description of the picture '.repeat(40).trim()}`;
      for (let n = 0; n < 6; n++) {
        fake.enqueue(scriptReply(`Reply ${n}.`, ASKING));
        await readSse(await small.post(`/api/conversations/${id}/messages`, { text: long(n) }));
      }
      const last = chatRequest(-1);
      expect(last.options.num_ctx).toBe(2048);
      expect(last.messages[0]!.role).toBe('system');
      expect(last.messages.at(-1)!.content).toBe(long(5));
      expect(last.messages.some((m) => m.content === long(0))).toBe(false);
      expect(last.messages.length).toBeLessThan(chatRequest(2).messages.length + 6);
      const chars = last.messages.reduce((sum, m) => sum + m.content.length, 0);
      expect(chars / 3.5).toBeLessThan(2048);
    } finally {
      await small.close();
    }
  });
});
