// Models through the JSON API: what Ollama and the image server offer, a chat model and a checkpoint per
// conversation (names a server lacks refused with 422), a pull with its progress, and the prompt written for
// the family of the checkpoint that paints, with that family's settings.
import { describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { useEasel } from '../helpers/easel.ts';
import { readSse } from '../helpers/sse.ts';
import { replyMeta } from '../helpers/replies.ts';

const SD15 = 'v1-5-pruned-emaonly.safetensors';
const SDXL = 'sd_xl_base_1.0.safetensors';

const { fake, a1111, easel } = useEasel('each test', { a1111: { stepDelayMs: 5, checkpoints: [SD15, SDXL] } });

interface ModelsAnswer {
  chat: { default: string; installed: Array<{ name: string; sizeBytes: number; capabilities: string[]; contextLength: number | null }>; problem: string | null };
  image: { backend: string; checkpoints: Array<{ name: string; family: string | null }>; current: string | null; samplers: string[]; schedulers: string[]; problem: string | null };
}

async function models(): Promise<ModelsAnswer> {
  const response = await easel.get('/api/models');
  expect(response.status).toBe(200);
  return (await response.json()) as ModelsAnswer;
}

async function putSettings(id: string, patch: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await easel.put(`/api/conversations/${id}/settings`, patch);
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function pane(id: string): Promise<{ settings: Record<string, unknown>; family: { id: string; source: string; tokenBudget: number } }> {
  return (await (await easel.get(`/api/conversations/${id}`)).json()) as never;
}

describe('GET /api/models', () => {
  it('lists Ollama’s models with their capabilities and context, and the image server’s checkpoints with their family', async () => {
    fake.setModels([
      'mistral:7b',
      { name: 'gemma3:4b', capabilities: ['completion', 'vision'], contextLength: 131_072, sizeBytes: 3_338_801_804, family: 'gemma3' },
    ]);
    const answer = await models();
    expect(answer.chat.default).toBe('mistral:7b');
    expect(answer.chat.problem).toBeNull();
    const gemma = answer.chat.installed.find((model) => model.name === 'gemma3:4b');
    expect(gemma).toMatchObject({ capabilities: ['completion', 'vision'], contextLength: 131_072, sizeBytes: 3_338_801_804 });
    expect(answer.image.backend).toBe('a1111');
    expect(answer.image.checkpoints).toEqual(expect.arrayContaining([expect.objectContaining({ family: 'sd15' }), expect.objectContaining({ family: 'sdxl' })]));
    expect(answer.image.samplers.length).toBeGreaterThan(0);
  });

  it('an Ollama that is down lists nothing and says why; the image part still answers', async () => {
    fake.setDown(true);
    const answer = await models();
    expect(answer.chat.installed).toEqual([]);
    expect(answer.chat.problem).toMatch(/Ollama/);
    expect(answer.image.checkpoints.length).toBe(2);
  });
});

describe('a chat model per conversation', () => {
  it('a model Ollama lacks is refused with 422 and nothing changes; an installed one is used for the next reply', async () => {
    fake.setModels(['mistral:7b', 'qwen2.5:7b']);
    const id = await easel.newConversation();
    const refused = await putSettings(id, { chatModel: 'llama9:70b' });
    expect(refused.status).toBe(422);
    expect((refused.body.fields as Record<string, string>).chatModel).toContain('llama9:70b');
    expect((await pane(id)).settings.chatModel).toBeNull();

    expect((await putSettings(id, { chatModel: 'qwen2.5:7b' })).status).toBe(200);
    fake.enqueue(scriptReply('Hello!', replyMeta('')));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'hi' }));
    expect(fake.chatRequests().at(-1)?.model).toBe('qwen2.5:7b');
  });

  it('a name no Ollama model can have is refused as such, not looked for among the installed ones', async () => {
    const id = await easel.newConversation();
    for (const field of ['chatModel', 'visionModel']) {
      const refused = await putSettings(id, { [field]: 'two words' });
      expect(refused.status).toBe(422);
      expect((refused.body.fields as Record<string, string>)[field]).toContain('must be an Ollama model name');
    }
  });

  it('a model pulled in a terminal since the last listing is found by asking again', async () => {
    fake.setModels(['mistral:7b']);
    const id = await easel.newConversation();
    await models();
    fake.setModels(['mistral:7b', 'llama3.1:8b']);
    expect((await putSettings(id, { chatModel: 'llama3.1:8b' })).status).toBe(200);
  });
});

describe('POST /api/models/pull', () => {
  it('streams Ollama’s progress, then done; the model is then listed and can be chosen', async () => {
    fake.setPullable({ 'gemma3:1b': { totalBytes: 815_000_000, steps: 4 } });
    const response = await easel.post('/api/models/pull', { name: 'gemma3:1b' });
    expect(response.status).toBe(200);
    const events = await readSse(response);
    const progress = events.filter((event) => event.type === 'progress').map((event) => event.data as { status: string; completed?: number; total?: number });
    expect(progress[0]?.status).toBe('pulling manifest');
    expect(progress.some((line) => line.total === 815_000_000 && (line.completed ?? 0) > 0)).toBe(true);
    expect(events.at(-1)).toMatchObject({ type: 'done', data: { name: 'gemma3:1b' } });
    expect((await models()).chat.installed.map((model) => model.name)).toContain('gemma3:1b');
    const id = await easel.newConversation();
    expect((await putSettings(id, { chatModel: 'gemma3:1b' })).status).toBe(200);
  });

  it('a name the registry lacks ends with an error in Ollama’s own words', async () => {
    const events = await readSse(await easel.post('/api/models/pull', { name: 'nosuchmodel:1b' }));
    const last = events.at(-1);
    expect(last?.type).toBe('error');
    expect(last?.data).toMatchObject({ code: 'pull_failed' });
    expect(String(last?.data.message)).toContain('file does not exist');
  });

  it('a name that is not a model name is refused with 422 before Ollama is asked', async () => {
    const response = await easel.post('/api/models/pull', { name: 'rm -rf /' });
    expect(response.status).toBe(422);
    // Under the field, for a client that marks it.
    expect(((await response.json()) as { fields?: Record<string, string> }).fields?.name).toContain('must be an Ollama model name');
    expect(fake.requests.some((request) => request.path === '/api/pull')).toBe(false);
  });

  it('closing the stream cancels the pull, and the model is not installed', async () => {
    let release!: () => void;
    fake.setPullable({ 'big:70b': { totalBytes: 40e9, steps: 10, gate: new Promise<void>((resolve) => (release = resolve)) } });
    const controller = new AbortController();
    const response = await easel.post('/api/models/pull', { name: 'big:70b' }, { signal: controller.signal });
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    await fake.waitForPullCancelled(1);
    release();
    expect(fake.pullsCancelled).toContain('big:70b');
    expect((await models()).chat.installed.map((model) => model.name)).not.toContain('big:70b');
  });
});

describe('a checkpoint per conversation, and its family', () => {
  it('a checkpoint the server does not list is refused with 422', async () => {
    const id = await easel.newConversation();
    const refused = await putSettings(id, { checkpoint: 'not-there.safetensors' });
    expect(refused.status).toBe(422);
    expect(refused.body.fields).toHaveProperty('checkpoint');
  });

  it('SDXL brings its settings where the user has not set them: size to its bucket, steps and CFG', async () => {
    const id = await easel.newConversation();
    await putSettings(id, { width: 512, height: 768 });
    await putSettings(id, { steps: 12 });
    const listed = (await models()).image.checkpoints.find((entry) => entry.family === 'sdxl')!;
    const changed = await putSettings(id, { checkpoint: listed.name });
    expect(changed.status).toBe(200);
    // Steps were set by hand: kept. CFG follows the family; the portrait stays a portrait.
    expect(changed.body).toMatchObject({ steps: 12, cfg: 6, width: 832, height: 1216, checkpoint: listed.name });
    expect((await pane(id)).family).toMatchObject({ id: 'sdxl', source: 'checkpoint', tokenBudget: 75 });
  });

  it('the reply is asked for in the family’s style, and the image is made with that checkpoint', async () => {
    const id = await easel.newConversation();
    const listed = (await models()).image.checkpoints.find((entry) => entry.family === 'sdxl')!;
    await putSettings(id, { checkpoint: listed.name, steps: 4 });
    fake.enqueue(scriptReply('Painting it.', replyMeta('red fox, snow, dawn light', { generate_image: true, steps: 4 })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a fox in the snow' }));
    const system = fake.chatRequests().at(-1)?.messages?.[0]?.content ?? '';
    expect(system).toContain('THE IMAGE MODEL is SDXL');
    const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, {}));
    const txt2img = a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').at(-1);
    expect((txt2img?.body as { override_settings?: Record<string, unknown> }).override_settings?.sd_model_checkpoint).toBe(listed.name);
    expect(events.find((event) => event.type === 'image')?.data.model).toMatch(/sd_xl_base_1\.0/);
  });

  it('a family chosen by hand wins: Flux keeps CFG 1 and drops the model’s negative prompt', async () => {
    const id = await easel.newConversation();
    const set = await putSettings(id, { family: 'flux' });
    expect(set.body).toMatchObject({ family: 'flux', cfg: 1, width: 1024, height: 1024 });
    fake.enqueue(scriptReply('Here.', replyMeta('A red fox in the snow at dawn.', { cfg: 7, negative_prompt: 'blurry' })));
    await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: 'a fox' }));
    const after = await pane(id);
    expect(after.settings).toMatchObject({ cfg: 1, negativePrompt: '' });
    expect(after.family).toMatchObject({ id: 'flux', source: 'setting' });
  });

  it('an unknown family is refused with the list of families', async () => {
    const id = await easel.newConversation();
    const refused = await putSettings(id, { family: 'sd4' });
    expect(refused.status).toBe(422);
    expect(String(refused.body.error)).toContain('sdxl');
  });
});

describe('what the review found', () => {
  it('a checkpoint copied in since the last listing is taken by a Generate override, as by PUT settings', async () => {
    await models();
    a1111.setCheckpoints([SD15, SDXL, 'new_model_xl.safetensors']);
    const id = await easel.newConversation();
    await easel.put(`/api/conversations/${id}/prompt`, { prompt: 'a red fox' });
    const response = await easel.post(`/api/conversations/${id}/generations`, { settings: { checkpoint: 'new_model_xl', steps: 2 } });
    expect(response.status).toBe(200);
    await readSse(response);
    const txt2img = a1111.requests.filter((request) => request.path === '/sdapi/v1/txt2img').at(-1);
    expect((txt2img?.body as { override_settings?: Record<string, unknown> }).override_settings?.sd_model_checkpoint).toBe('new_model_xl');
  });

  it('a size typed by hand is kept when the family changes; a family size moves to the new family’s', async () => {
    const id = await easel.newConversation();
    await putSettings(id, { width: 640, height: 448 });
    expect((await putSettings(id, { family: 'sdxl' })).body).toMatchObject({ width: 640, height: 448 });
    await putSettings(id, { width: 512, height: 768, family: 'sd15' });
    expect((await putSettings(id, { family: 'flux' })).body).toMatchObject({ width: 832, height: 1216 });
  });

  it('a change of family while the reply is written wins: the reply’s CFG is fitted to Flux', async () => {
    const id = await easel.newConversation();
    let release!: () => void;
    fake.enqueue({ chunks: ['Here', ' it is.\n---\n', JSON.stringify(replyMeta('a red fox', { cfg: 7 }))], gate: new Promise<void>((resolve) => (release = resolve)) });
    const reply = easel.post(`/api/conversations/${id}/messages`, { text: 'a fox' }).then(readSse);
    await fake.waitForRequests(1, '/api/chat');
    expect((await putSettings(id, { family: 'flux' })).body).toMatchObject({ cfg: 1 });
    release();
    await reply;
    expect((await pane(id)).settings).toMatchObject({ cfg: 1 });
  });

  it('a chat model is stored as Ollama names it, and one that cannot chat is refused', async () => {
    fake.setModels(['mistral:latest', { name: 'nomic-embed-text:latest', capabilities: ['embedding'] }]);
    const id = await easel.newConversation();
    expect((await putSettings(id, { chatModel: 'mistral' })).body).toMatchObject({ chatModel: 'mistral:latest' });
    const refused = await putSettings(id, { chatModel: 'nomic-embed-text:latest' });
    expect(refused.status).toBe(422);
    expect(String(refused.body.error)).toContain('cannot chat');
  });
});
