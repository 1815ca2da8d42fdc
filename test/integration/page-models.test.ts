// Settings → Models on the page's routes, with the real server and the fakes, without Chromium: the section's
// lists (GET /c/:id/models), a choice saved through PUT /c/:id/settings (checked with the servers, as the API's),
// a pull streamed as the page's HTML (POST /c/:id/models/pull), and the status line when the default model is missing.
// The browser suite (test/browser/models.test.ts) has what a person sees.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { replyMeta } from '../helpers/replies.ts';
import { useEasel } from '../helpers/easel.ts';
import { find, partials, read } from '../helpers/html.ts';
import { sendForm } from '../helpers/page-stage.ts';
import { readSseFrames } from '../helpers/sse.ts';

const CHECKPOINTS = ['v1-5-pruned-emaonly.safetensors', 'SDXL/juggernautXL_v9.safetensors', 'flux1-dev.safetensors'];

const { fake, easel } = useEasel('each test', { a1111: { stepDelayMs: 5, checkpoints: CHECKPOINTS } });

const send = (method: string, path: string, fields?: Record<string, string>) => sendForm(easel, method, path, fields);
const getPage = (path: string) => fetch(easel.url + path);
const partialText = (markup: string, target: string) => partials(markup).find((partial) => partial.target === target)?.text;

const LLAVA = { name: 'llava:7b', capabilities: ['completion', 'vision'], sizeBytes: 4_700_000_000, parameterSize: '7B' };

async function storedSettings(id: string): Promise<Record<string, unknown>> {
  return ((await (await easel.get(`/api/conversations/${id}`)).json()) as { settings: Record<string, unknown> }).settings;
}

/** The options of a select in a models answer: `value=label`, the selected one marked with a `*`. */
function optionsOf(markup: string, select: string): string[] {
  return read(markup)
    .querySelectorAll(`#${select} option`)
    .map((option) => `${option.hasAttribute('selected') ? '*' : ''}${option.getAttribute('value')}=${option.text}`);
}

describe('the models section', () => {
  it('the page draws it at once with the current values, and loads the lists by itself', async () => {
    const id = await easel.newConversation();
    const markup = await (await getPage(`/c/${id}`)).text();
    const section = find(read(markup), '#settings-form fieldset#models');
    expect(section.attributes).toMatchObject({ 'hx-get': `/c/${id}/models`, 'hx-trigger': 'load, focusin throttle:15s, easel:models from:body' });
    expect(optionsOf(section.toString(), 'setting-chatModel')).toEqual(['*=Default', '=Asking Ollama…']);
    // The pull's own form is outside the settings form, its fields beside the chat model.
    expect(find(read(markup), 'form#pull-form').getAttribute('hx-post')).toBe(`/c/${id}/models/pull`);
    expect(read(markup).querySelector('#settings-form #pull-form')).toBeNull();
  });

  it('lists the installed chat models and the checkpoints with their families, the choices on screen selected', async () => {
    fake.setModels(['mistral:7b', LLAVA]);
    const id = await easel.newConversation();
    const response = await getPage(`/c/${id}/models?chatModel=llava:7b&checkpoint=`);
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const markup = await response.text();
    expect(optionsOf(markup, 'setting-chatModel')).toEqual(['=Default (mistral:7b)', 'mistral:7b=mistral:7b · 4.4 GB · 7.2B', '*llava:7b=llava:7b · 4.7 GB · 7B · vision']);
    const checkpoints = optionsOf(markup, 'setting-checkpoint');
    // A1111's checkpoints by their model_name (server/a1111), each with the family its name says.
    expect(checkpoints).toEqual([
      "*=Server's current (v1-5-pruned-emaonly)",
      'v1-5-pruned-emaonly=v1-5-pruned-emaonly · SD 1.5',
      'SDXL_juggernautXL_v9=SDXL_juggernautXL_v9 · SDXL',
      'flux1-dev=flux1-dev · Flux',
    ]);
    expect(optionsOf(markup, 'setting-sampler')[0]).toBe('*=Server default');
    expect(optionsOf(markup, 'setting-sampler')).toContain('DPM++ 2M=DPM++ 2M');
    expect(optionsOf(markup, 'setting-scheduler')).toContain('Automatic=Automatic');
    expect(find(read(markup), '#family-detect').text).toBe('Detect (SD 1.5, from the checkpoint)');
  });

  it('a server that cannot be asked says why in place of its select', async () => {
    fake.setDown(true);
    try {
      const id = await easel.newConversation();
      const root = read(await (await getPage(`/c/${id}/models`)).text());
      expect(root.querySelector('#setting-chatModel')).toBeNull();
      expect(find(root, '.field-chatModel .models-problem').text).toMatch(/Ollama/);
      // The image server still answers.
      expect(root.querySelector('#setting-checkpoint')).not.toBeNull();
    } finally {
      fake.setDown(false);
    }
  });
});

describe('choosing from the page', () => {
  it('a chat model Ollama lacks is refused at its field with the service\'s words, and nothing is stored', async () => {
    const id = await easel.newConversation();
    const response = await send('PUT', `/c/${id}/settings`, { chatModel: 'nope:1b', steps: '20', changed: 'chatModel' });
    expect(response.status).toBe(422);
    const body = await response.text();
    expect(partialText(body, '#error-chatModel')).toBe('Ollama has no model nope:1b: pull it first (`ollama pull nope:1b` or the Pull button), or pick an installed one.');
    expect(partialText(body, '#settings-status')).toBe('Not saved: fix the marked field.');
    expect((await storedSettings(id)).chatModel).toBeNull();
  });

  it('a model pulled since the last listing is asked about and saved; \'\' goes back to the default', async () => {
    const id = await easel.newConversation();
    await getPage(`/c/${id}/models`);
    fake.setModels(['mistral:7b', LLAVA]);
    const response = await send('PUT', `/c/${id}/settings`, { chatModel: 'llava:7b', changed: 'chatModel' });
    expect(response.status).toBe(200);
    expect(partialText(await response.text(), '#settings-status')).toBe('Saved.');
    expect((await storedSettings(id)).chatModel).toBe('llava:7b');
    await send('PUT', `/c/${id}/settings`, { chatModel: '', changed: 'chatModel' });
    expect((await storedSettings(id)).chatModel).toBeNull();
  });

  it('with Ollama down, a change of steps is saved: the unchanged chat model in the form is not asked about', async () => {
    fake.setModels(['mistral:7b', LLAVA]);
    const id = await easel.newConversation();
    expect((await send('PUT', `/c/${id}/settings`, { chatModel: 'llava:7b', changed: 'chatModel' })).status).toBe(200);
    fake.setDown(true);
    try {
      const response = await send('PUT', `/c/${id}/settings`, { chatModel: 'llava:7b', steps: '33', changed: 'steps' });
      expect(response.status).toBe(200);
      expect(await storedSettings(id)).toMatchObject({ chatModel: 'llava:7b', steps: 33 });
    } finally {
      fake.setDown(false);
    }
  });

  it('another checkpoint brings its family: the answer carries the new size, steps and encoder, presets and hints', async () => {
    const id = await easel.newConversation();
    await getPage(`/c/${id}/models`);
    const name = 'flux1-dev';
    const response = await send('PUT', `/c/${id}/settings`, { checkpoint: name, changed: 'checkpoint' });
    expect(response.status).toBe(200);
    const root = read(await response.text());
    expect(find(root, '.pane-values').attributes).toMatchObject({ 'data-checkpoint': name, 'data-width': '1024', 'data-height': '1024', 'data-steps': '20', 'data-cfg': '1', 'data-encoder': 't5', 'data-token-limit': '512' });
    expect(find(root, '#family-hint-negativePrompt').text).toBe('Flux ignores the negative prompt.');
    expect(find(root, 'hx-partial[hx-target="#size-preset"] option[selected]').text).toBe('Square 1024 × 1024');
    // A reload draws the same.
    const page = read(await (await getPage(`/c/${id}`)).text());
    expect(find(page, '#prompt-count').attributes).toMatchObject({ 'data-token-limit': '512', 'data-encoder': 't5' });
    expect(find(page, '#family-hint-cfg').text).toBe('Flux ignores CFG.');
  });

  it('a checkpoint picked on the empty page brings its family to the conversation its first message makes', async () => {
    const id = randomUUID();
    const listed = ((await (await easel.get('/api/models')).json()) as { image: { checkpoints: Array<{ name: string; family: string }> } }).image.checkpoints;
    const sdxl = listed.find((checkpoint) => checkpoint.family === 'sdxl')!.name;
    // The model keeps the settings it is told (the system prompt asks it to).
    fake.enqueue(scriptReply('Hello!', replyMeta('', { steps: 30, cfg: 6 })));
    // The empty page sends its whole form: the defaults as they are, and the checkpoint picked.
    const form = { text: 'a fox', sendKey: randomUUID(), startNew: '1', steps: '20', cfg: '7', seed: '-1', width: '512', height: '512', negativePrompt: '', autoGenerate: 'on', checkpoint: sdxl };
    const response = await send('POST', `/c/${id}/messages`, form);
    expect(response.status, await response.clone().text()).toBe(200);
    await response.text();
    // SDXL's steps and CFG, told to the model with the first message, and its square for the default square.
    expect(fake.chatRequests()[0]?.messages?.at(-1)?.content).toContain('steps 30, cfg 6');
    expect(await storedSettings(id)).toMatchObject({ checkpoint: sdxl, steps: 30, cfg: 6, width: 1024, height: 1024 });
  });
});

describe('pulling from the page', () => {
  it('streams the bar with what is left of the current layer, then "Pulled", and the model is listed', async () => {
    fake.setPullable({ 'llava:7b': { ...LLAVA, totalBytes: 4_100_000_000, steps: 4 } });
    const id = await easel.newConversation();
    const response = await send('POST', `/c/${id}/models/pull`, { name: ' llava:7b ' });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
    const frames = await readSseFrames(response);
    const html = frames.filter((frame) => frame.event === 'message').map((frame) => frame.data);
    expect(partials(html[0]).map((partial) => partial.target)).toEqual(['#pull-result', '#pull-progress']);
    const bars = html.filter((data) => data.includes('<progress')).map((data) => read(data));
    const lefts = bars.map((bar) => bar.querySelector('.pull-left')?.text).filter((left) => left !== undefined);
    expect(lefts).toContain('4.1 GB of 4.1 GB left');
    expect(lefts).toContain('3.1 GB of 4.1 GB left');
    expect(lefts).toContain('0 B of 4.1 GB left');
    expect(bars.map((bar) => bar.querySelector('.pull-status')?.text)).toContain('pulling manifest');
    expect(bars.map((bar) => bar.querySelector('.pull-status')?.text)).toContain('verifying sha256 digest');
    expect(partialText(html.at(-1)!, '#pull-result')).toBe('Pulled llava:7b. Pick it as the chat model above.');
    // The section refreshes its lists (easel:models), and the new model is there to pick.
    expect(frames.at(-1)?.event).toBe('easel:models');
    expect(optionsOf(await (await getPage(`/c/${id}/models`)).text(), 'setting-chatModel')).toContain('llava:7b=llava:7b · 4.7 GB · 7B · vision');
  });

  it('Ollama\'s refusal is said in its words as an alert; a name that is none is refused before asking', async () => {
    const id = await easel.newConversation();
    const frames = await readSseFrames(await send('POST', `/c/${id}/models/pull`, { name: 'nosuch:1b' }));
    const last = read(frames.at(-1)!.data);
    expect(find(last, '[role="alert"]').text).toContain('pull model manifest: file does not exist');
    expect(frames.some((frame) => frame.event === 'easel:models')).toBe(false);

    const refused = await send('POST', `/c/${id}/models/pull`, { name: 'not a <name>' });
    expect(refused.status).toBe(422);
    expect(partialText(await refused.text(), '#pull-result')).toBe('name must be an Ollama model name such as mistral:7b or gemma3:4b.');
  });

  it('closing the stream cancels the pull in Ollama', async () => {
    let release!: () => void;
    fake.setPullable({ 'llava:7b': { ...LLAVA, gate: new Promise<void>((resolve) => (release = resolve)) } });
    const id = await easel.newConversation();
    const controller = new AbortController();
    const response = await fetch(`${easel.url}/c/${id}/models/pull`, {
      method: 'POST',
      headers: { 'sec-fetch-site': 'same-origin' },
      body: new URLSearchParams({ name: 'llava:7b' }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    let seen = '';
    while (!seen.includes('pulling ')) seen += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    await fake.waitForPullCancelled();
    release();
    expect(fake.pullsCancelled).toEqual(['llava:7b']);
  });
});

describe('the status line when the default model is missing', () => {
  it('offers the installed models and a pull; the conversation\'s own model, installed, is said instead', async () => {
    fake.setModels([LLAVA]);
    const root = read(await (await getPage('/status')).text());
    const warn = find(root, '.state.warn');
    expect(warn.text).toBe('mistral:7b is not pulled. Pick an installed model in Settings → Models, or pull it.');
    expect(find(warn, 'a.pick-model').getAttribute('href')).toBe('#setting-chatModel');
    expect(find(warn, 'button.pull-missing').getAttribute('data-pull')).toBe('mistral:7b');

    const own = read(await (await getPage('/status?chatModel=llava:7b')).text());
    expect(find(own, '.state.ok').text).toBe("Ollama is ready with llava:7b (this conversation's model; the default mistral:7b is not pulled).");

    fake.setModels([]);
    const none = find(read(await (await getPage('/status')).text()), '.state.warn');
    expect(none.text).toBe('The model mistral:7b is not pulled: run ollama pull mistral:7b, or pull it.');
    expect(find(none, 'code').text).toBe('ollama pull mistral:7b');
  });
});
