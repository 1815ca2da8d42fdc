// The page's small parts without a browser: what the prompt pane, the library and the chat's head
// render, read as HTML (node-html-parser) for the ids, htmx attributes and words that web/easel.js, htmx
// and a person depend on; the settings form's reading; the send keys; the served assets.
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, describeFamily, type PaneView } from '../../../server/core/index.ts';
import { loadAssets } from '../../../server/http/page/assets.ts';
import { renderChatHead, renderConversationItems, renderCreated, renderLibrary } from '../../../server/http/page/library.ts';
import { html, renderMessage, renderPartial } from '../../../server/http/page/markup.ts';
import { renderFieldMeta, renderPaneUpdate, renderPromptHistory, renderSuggestion } from '../../../server/http/page/pane.ts';
import { createSendGuard, isSendKey } from '../../../server/http/page/send-guard.ts';
import { describeInstalled, formatBytes, renderModelsSection, renderModelsUpdate, renderPullEvent } from '../../../server/http/page/models-view.ts';
import { readSettingsForm, withoutUnchangedChoices } from '../../../server/http/page/settings-form.ts';
import { find, partials, read, targets } from '../../helpers/html.ts';

const PANE: PaneView = {
  paneRevision: 5,
  prompt: 'a lighthouse at dusk',
  promptVersion: 4,
  suggestion: null,
  settings: { ...DEFAULT_SETTINGS, steps: 30, cfg: 6.5, seed: 42, negativePrompt: 'blurry' },
  family: describeFamily(DEFAULT_SETTINGS, null),
  pinned: [],
  settingSuggestions: {},
  canUndo: true,
  canRedo: false,
};

describe('the prompt pane', () => {
  it('Undo and Redo post to the conversation with the prompt, each enabled only when it can act', () => {
    const root = read(renderPromptHistory('c 1', { canUndo: true, canRedo: false }));
    const undo = find(root, '#prompt-history > #prompt-undo');
    const redo = find(root, '#prompt-history > #prompt-redo');
    expect(undo.getAttribute('hx-post')).toBe('/c/c%201/prompt/undo');
    expect(redo.getAttribute('hx-post')).toBe('/c/c%201/prompt/redo');
    for (const button of [undo, redo]) {
      expect(button.getAttribute('hx-include')).toBe('#prompt');
      expect(button.getAttribute('hx-swap')).toBe('none');
      expect(button.getAttribute('type')).toBe('button');
    }
    expect([undo.text, redo.text]).toEqual(['Undo', 'Redo']);
    expect([undo.getAttribute('aria-keyshortcuts'), redo.getAttribute('aria-keyshortcuts')]).toEqual(['Control+Z', 'Control+Shift+Z']);
    expect(undo.getAttribute('title')).toBe('Back to the previous version of the prompt (Ctrl+Z outside a text field)');
    expect(redo.getAttribute('title')).toBe('Forward to the next version of the prompt (Ctrl+Shift+Z outside a text field)');
    expect([undo.hasAttribute('disabled'), redo.hasAttribute('disabled')]).toEqual([false, true]);
    const swapped = read(renderPromptHistory('c1', { canUndo: false, canRedo: true }));
    expect([find(swapped, '#prompt-undo').hasAttribute('disabled'), find(swapped, '#prompt-redo').hasAttribute('disabled')]).toEqual([true, false]);
  });

  it('the waiting suggestion shows the model\'s prompt with "Use suggestion" and "Keep mine", and hides when there is none', () => {
    const root = read(renderSuggestion('c1', { suggestion: { prompt: 'a <b>red</b> lighthouse', turnId: 3 } }));
    const box = find(root, '#suggestion');
    expect(box.hasAttribute('hidden')).toBe(false);
    expect(find(box, '#suggestion-text').text).toBe('a <b>red</b> lighthouse');
    const use = find(box, '#use-suggestion');
    const keep = find(box, '#dismiss-suggestion');
    expect([use.getAttribute('hx-post'), keep.getAttribute('hx-post')]).toEqual(['/c/c1/suggestion', '/c/c1/suggestion']);
    expect([JSON.parse(use.getAttribute('hx-vals')!), JSON.parse(keep.getAttribute('hx-vals')!)]).toEqual([{ accept: '1' }, { accept: '0' }]);
    // Taking it saves the user's current text as a version first, so the prompt goes with it.
    expect(use.getAttribute('hx-include')).toBe('#prompt');
    expect([use.text, keep.text]).toEqual(['Use suggestion', 'Keep mine']);

    const none = find(read(renderSuggestion('c1', { suggestion: null })), '#suggestion');
    expect(none.hasAttribute('hidden')).toBe(true);
    expect(find(none, '#suggestion-text').text).toBe('');
  });

  it('a pinned setting says so and offers to unpin; the model\'s different value is offered beside it', () => {
    const root = read(renderFieldMeta('c1', 'steps', { pinned: ['steps'], settingSuggestions: { steps: 40 } }));
    const meta = find(root, '#meta-steps.field-meta');
    const pin = find(meta, 'button.pin');
    expect(pin.getAttribute('hx-post')).toBe('/c/c1/settings/unpin');
    expect(JSON.parse(pin.getAttribute('hx-vals')!)).toEqual({ field: 'steps' });
    expect(pin.getAttribute('aria-label')).toBe('Steps is set by you; let the assistant set it again');
    expect(pin.text).toBe('Set by you ✕');
    const take = find(meta, 'button.setting-suggestion');
    expect(take.getAttribute('hx-post')).toBe('/c/c1/settings/suggestion');
    expect(JSON.parse(take.getAttribute('hx-vals')!)).toEqual({ field: 'steps' });
    expect(take.text).toBe('Assistant suggests 40');
    expect(take.getAttribute('title')).toBe('40');

    const free = find(read(renderFieldMeta('c1', 'cfg', { pinned: ['steps'], settingSuggestions: {} })), '#meta-cfg');
    expect(free.childNodes).toHaveLength(0);
  });

  it('a suggested value reads as a person reads it: the random seed named, text quoted and cut after 60 characters', () => {
    const offered = (field: 'seed' | 'cfg' | 'negativePrompt', value: number | string) =>
      find(read(renderFieldMeta('c1', field, { pinned: [field], settingSuggestions: { [field]: value } })), '.setting-suggestion');
    expect(offered('seed', -1).text).toBe('Assistant suggests -1 (random)');
    expect(offered('seed', 7).text).toBe('Assistant suggests 7');
    expect(offered('cfg', -1).text).toBe('Assistant suggests -1');
    expect(offered('negativePrompt', 'x'.repeat(60)).text).toBe(`Assistant suggests “${'x'.repeat(60)}”`);
    const long = `${'y'.repeat(60)}z and more`;
    expect(offered('negativePrompt', long).text).toBe(`Assistant suggests “${'y'.repeat(60)}…”`);
    // The whole value stays readable on hover.
    expect(offered('negativePrompt', long).getAttribute('title')).toBe(long);
  });

  it('an update replaces Undo/Redo, the suggestion and each setting\'s note, and hands the values over last', () => {
    const update = renderPaneUpdate('c1', PANE);
    expect(targets(update)).toEqual([
      '#prompt-history outerHTML',
      '#suggestion outerHTML',
      '#meta-steps outerHTML',
      '#meta-cfg outerHTML',
      '#meta-seed outerHTML',
      '#meta-negativePrompt outerHTML',
      '#size-preset innerMorph',
      '#family-hint-cfg outerHTML',
      '#family-hint-negativePrompt outerHTML',
      '#family-detect textContent',
      '#pane-inbox innerHTML',
    ]);
    const root = read(update);
    expect(find(root, 'hx-partial[hx-target="#prompt-history"] #prompt-undo').hasAttribute('disabled')).toBe(false);
    expect(root.querySelector('hx-partial[hx-target="#suggestion"] #suggestion')).not.toBeNull();
    expect(root.querySelector('hx-partial[hx-target="#meta-seed"] #meta-seed')).not.toBeNull();
    const values = find(root, 'hx-partial[hx-target="#pane-inbox"] .pane-values');
    expect(values.attributes).toEqual({
      class: 'pane-values',
      'data-revision': '5',
      'data-prompt': 'a lighthouse at dusk',
      'data-version': '4',
      'data-steps': '30',
      'data-cfg': '6.5',
      'data-seed': '42',
      'data-negative-prompt': 'blurry',
      'data-width': '512',
      'data-height': '512',
      'data-chat-model': '',
      'data-checkpoint': '',
      'data-sampler': '',
      'data-scheduler': '',
      'data-family': '',
      'data-vision-model': '',
      'data-token-limit': '75',
      'data-encoder': 'clip',
    });
    const forced = find(read(renderPaneUpdate('c1', { ...PANE, promptVersion: null }, { force: true })), '.pane-values');
    expect(forced.getAttribute('data-force')).toBe('yes');
    expect(forced.getAttribute('data-version')).toBe('');
  });

  it('an update follows the family: its presets, a hint under what it ignores, its encoder, and what Detect finds', () => {
    const flux = { ...PANE, settings: { ...PANE.settings, checkpoint: 'flux1-dev.safetensors', width: 832, height: 1216 }, family: describeFamily({ family: null, checkpoint: 'flux1-dev.safetensors' }, null) };
    const update = renderPaneUpdate('c1', flux);
    const root = read(update);
    expect(root.querySelectorAll('hx-partial[hx-target="#size-preset"] option').map((option) => option.text)).toEqual([
      'Custom',
      'Square 1024 × 1024',
      'Portrait 832 × 1216',
      'Landscape 1216 × 832',
      'Portrait 896 × 1152',
      'Landscape 1152 × 896',
      'Portrait 768 × 1344',
      'Landscape 1344 × 768',
    ]);
    expect(find(root, 'hx-partial[hx-target="#size-preset"] option[selected]').getAttribute('value')).toBe('832x1216');
    expect(find(root, '#family-hint-negativePrompt').text).toBe('Flux ignores the negative prompt.');
    expect(find(root, '#family-hint-cfg').text).toBe('Flux ignores CFG.');
    expect(partials(update).find((partial) => partial.target === '#family-detect')?.text).toBe('Detect (Flux, from the checkpoint)');
    expect(find(root, '.pane-values').attributes).toMatchObject({ 'data-checkpoint': 'flux1-dev.safetensors', 'data-token-limit': '512', 'data-encoder': 't5', 'data-width': '832' });
    // SD 1.5 reads both: the hints are empty.
    expect(find(read(renderPaneUpdate('c1', PANE)), '#family-hint-cfg').text).toBe('');
    // A family chosen by hand, the server's checkpoint deciding: what Detect finds is for the lists to say.
    const chosen = { ...PANE, settings: { ...PANE.settings, family: 'sdxl' as const }, family: describeFamily({ family: 'sdxl', checkpoint: null }, null) };
    expect(targets(renderPaneUpdate('c1', chosen))).not.toContain('#family-detect textContent');
    expect(find(read(renderPaneUpdate('c1', chosen)), '.pane-values').getAttribute('data-family')).toBe('sdxl');
  });
});

describe('Settings → Models', () => {
  const VIEW = {
    chat: {
      default: 'mistral:7b',
      visionDefault: null,
      installed: [
        { name: 'mistral:7b', sizeBytes: 4_372_824_384, parameterSize: '7.2B', quantization: 'Q4_0', family: 'llama', capabilities: ['completion', 'tools'], contextLength: 32768 },
        { name: 'llava<b>:7b', sizeBytes: 4_700_000_000, parameterSize: '7B', quantization: 'Q4_0', family: 'llama', capabilities: ['completion', 'vision'], contextLength: 4096 },
        { name: 'nomic-embed-text', sizeBytes: 274_000_000, parameterSize: '137M', quantization: 'F16', family: 'nomic-bert', capabilities: ['embedding'], contextLength: 2048 },
      ],
      problem: null,
    },
    image: {
      backend: 'a1111' as const,
      checkpoints: [
        { name: 'v1-5-pruned-emaonly.safetensors [6ce0161689]', family: 'sd15' as const },
        { name: 'SDXL/juggernautXL_v9.safetensors', family: 'sdxl' as const },
        { name: 'mystery.ckpt', family: null },
      ],
      current: 'v1-5-pruned-emaonly.safetensors [6ce0161689]',
      samplers: ['DPM++ 2M', 'Euler a'],
      schedulers: ['Automatic', 'Karras'],
      problem: null,
    },
  };
  const NONE = { chatModel: null, checkpoint: null, sampler: null, scheduler: null, family: null, visionModel: null };

  it('drawn at once with the current values, loading its lists by itself, the pull beside the chat model', () => {
    const root = read(renderModelsSection('c 1', { ...NONE, chatModel: 'gemma3:4b', sampler: 'Euler a' }, PANE.family));
    expect(find(root, 'fieldset#models').attributes).toMatchObject({ 'hx-get': '/c/c%201/models', 'hx-trigger': 'load, focusin throttle:15s, easel:models from:body', 'hx-swap': 'none' });
    expect(find(root, '#setting-chatModel option[selected]').getAttribute('value')).toBe('gemma3:4b');
    expect(find(root, '#setting-chatModel option[disabled]').text).toBe('Asking Ollama…');
    expect(find(root, '#setting-sampler option[selected]').text).toBe('Euler a');
    // No scheduler chosen and none listed yet: no select.
    expect(root.querySelector('#setting-scheduler')).toBeNull();
    expect(find(root, '#family-detect').text).toBe("Detect (SD 1.5: the checkpoint's name does not say)");
    expect(find(root, '#pull-name').attributes).toMatchObject({ name: 'name', form: 'pull-form' });
    expect(find(root, '#pull-submit').attributes).toMatchObject({ type: 'submit', form: 'pull-form' });
    expect(find(root, '#pull-cancel').hasAttribute('hidden')).toBe(true);
  });

  it('the lists: sizes, parameters and capabilities, families, the servers\' defaults; names escaped', () => {
    const markup = String(renderModelsUpdate({ ...NONE, chatModel: 'llava<b>:7b', checkpoint: 'gone.safetensors' }, VIEW));
    expect(markup).not.toContain('llava<b>');
    expect(targets(markup)).toEqual(['#models-chat innerMorph', '#models-vision innerMorph', '#models-image innerMorph']);
    const root = read(markup);
    expect(root.querySelectorAll('#setting-chatModel option').map((option) => option.text)).toEqual([
      'Default (mistral:7b)',
      'mistral:7b · 4.4 GB · 7.2B · tools',
      'llava<b>:7b · 4.7 GB · 7B · vision',
      'nomic-embed-text · 274 MB · 137M · embedding only: cannot chat',
    ]);
    expect(find(root, '#setting-chatModel option[selected]').getAttribute('value')).toBe('llava<b>:7b');
    expect(find(root, '#setting-chatModel option[value="nomic-embed-text"]').hasAttribute('disabled')).toBe(true);
    expect(root.querySelectorAll('#setting-checkpoint option').map((option) => option.text)).toEqual([
      "Server's current (v1-5-pruned-emaonly.safetensors [6ce0161689])",
      'v1-5-pruned-emaonly.safetensors [6ce0161689] · SD 1.5',
      'SDXL/juggernautXL_v9.safetensors · SDXL',
      'mystery.ckpt',
      'gone.safetensors (not listed)',
    ]);
    expect(root.querySelectorAll('#setting-sampler option').map((option) => option.text)).toEqual(['Server default', 'DPM++ 2M', 'Euler a']);
    expect(root.querySelectorAll('#setting-scheduler option').map((option) => option.text)).toEqual(['Server default', 'Automatic', 'Karras']);
    expect(root.querySelectorAll('#setting-family option').map((option) => option.text)).toEqual([
      "Detect (SD 1.5: the checkpoint's name does not say)",
      'SD 1.5',
      'SD 2.x',
      'SDXL',
      'Pony Diffusion',
      'Illustrious / NoobAI',
      'Flux',
      'SD 3.x',
    ]);
    // The server's current checkpoint says its family.
    expect(find(read(renderModelsUpdate(NONE, VIEW)), '#family-detect').text).toBe('Detect (SD 1.5, from the checkpoint)');
    expect(find(read(renderModelsUpdate({ ...NONE, checkpoint: 'SDXL/juggernautXL_v9.safetensors', family: 'flux' }, VIEW)), '#family-detect').text).toBe('Detect (SDXL, from the checkpoint)');
  });

  it('a server that cannot be asked says why where its select would be; no image server shows the family alone', () => {
    const down = read(renderModelsUpdate(NONE, { chat: { ...VIEW.chat, installed: [], problem: 'Ollama is not reachable at <x>.' }, image: { ...VIEW.image, checkpoints: [], samplers: [], schedulers: [], current: null, problem: 'Connection refused.' } }));
    expect(down.querySelector('#setting-chatModel')).toBeNull();
    expect(find(down, '.field-chatModel .models-problem').text).toBe('Ollama is not reachable at <x>.');
    expect(find(down, '.field-checkpoint .models-problem').text).toBe('Connection refused.');
    expect(down.querySelectorAll('#error-chatModel, #error-checkpoint')).toHaveLength(2);
    const none = read(renderModelsUpdate(NONE, { ...VIEW, image: { backend: 'none', checkpoints: [], current: null, samplers: [], schedulers: [], problem: null } }));
    expect(none.querySelectorAll('hx-partial[hx-target="#models-image"] select').map((select) => select.id)).toEqual(['setting-family']);
    // The default model not installed is said.
    expect(find(read(renderModelsUpdate(NONE, { ...VIEW, chat: { ...VIEW.chat, installed: VIEW.chat.installed.slice(1) } })), '#setting-chatModel option').text).toBe('Default (mistral:7b, not pulled)');
  });

  it('a pull: the current layer\'s words and what is left of it, then the end or Ollama\'s words', () => {
    const bar = read(renderPullEvent('llava:7b', { type: 'progress', status: 'pulling 170370233dd5', digest: 'sha256:170370233dd5', completed: 1_200_000_000, total: 4_100_000_000 }));
    expect(targets(bar)).toEqual(['#pull-progress innerMorph']);
    expect(find(bar, '.pull-layer').text).toBe('Pulling llava:7b: pulling 170370233dd5');
    expect(find(bar, 'progress').attributes).toMatchObject({ max: '4100000000', value: '1200000000' });
    expect(find(bar, '.pull-left').text).toBe('2.9 GB of 4.1 GB left');
    // A step without sizes: the bar has no value (it shows activity).
    expect(find(read(renderPullEvent('llava:7b', { type: 'progress', status: 'verifying sha256 digest' })), 'progress').hasAttribute('value')).toBe(false);
    const done = partials(renderPullEvent('llava:7b', { type: 'done', name: 'llava:7b' }));
    expect(done.map((partial) => `${partial.target}=${partial.text}`)).toEqual(['#pull-progress=', '#pull-result=Pulled llava:7b. Pick it as the chat model above.']);
    const failed = read(renderPullEvent('nope', { type: 'error', code: 'pull_failed', message: 'Ollama could not pull "nope": <b>file does not exist</b>.' }));
    expect(find(failed, '[role="alert"]').text).toBe('Ollama could not pull "nope": <b>file does not exist</b>.');
    expect(formatBytes(1_500)).toBe('2 KB');
    expect(describeInstalled({ ...VIEW.chat.installed[0]!, parameterSize: null, capabilities: [] })).toBe('mistral:7b · 4.4 GB');
  });
});

const SUMMARY = (id: string, title: string) => ({ id, title, createdAt: '2026-11-20T08:00:00.000Z', updatedAt: '2026-11-21T09:30:12.000Z', preview: '' });

describe('the library', () => {
  it('New conversation and each item switch the conversation in place, keeping the address and the search', () => {
    const root = read(renderLibrary({ conversations: [SUMMARY('a1', 'Lighthouse'), SUMMARY('b2', 'Fox <in> snow')], currentId: 'b2', query: 'fo"x' }));
    const fresh = find(root, 'nav#library a.new-conversation');
    expect(fresh.text).toBe('New conversation');
    expect(fresh.attributes).toMatchObject({
      href: '/',
      'hx-get': '/',
      'hx-target': '#conversation',
      'hx-swap': 'outerHTML settle:0',
      'hx-push-url': '/',
      'hx-include': '#conversation-search',
    });
    expect(find(root, '#conversation-search').getAttribute('value')).toBe('fo"x');
    expect(find(root, '#current-conversation').attributes).toMatchObject({ type: 'hidden', name: 'current', value: 'b2' });
    const links = root.querySelectorAll('#conversation-list li a.conversation-link');
    expect(links.map((link) => [link.getAttribute('href'), link.getAttribute('hx-get'), link.getAttribute('hx-push-url')])).toEqual([
      ['/c/a1', '/c/a1', '/c/a1'],
      ['/c/b2', '/c/b2', '/c/b2'],
    ]);
    expect(links.map((link) => link.getAttribute('aria-current') ?? null)).toEqual([null, 'page']);
    expect(find(root, '#item-b2 .conversation-title').text).toBe('Fox <in> snow');
    expect(find(root, '#item-a1 time.conversation-time').getAttribute('datetime')).toBe('2026-11-21T09:30:12.000Z');
  });

  it('each item carries its whole title as a tooltip (the list cuts a long one with an ellipsis), escaped', () => {
    const long = 'A lighthouse on a cliff at dusk, "storm" <clouds> & rain';
    const root = read(renderConversationItems({ conversations: [SUMMARY('a1', long), SUMMARY('b2', 'Fox')], currentId: 'b2', query: '' }));
    expect(root.querySelectorAll('.conversation-title').map((title) => [title.getAttribute('title'), title.text])).toEqual([
      [long, long],
      ['Fox', 'Fox'],
    ]);
    // On the title alone: the link's name is not repeated as its description.
    expect(root.querySelectorAll('a.conversation-link[title]')).toHaveLength(0);
  });

  it('an empty list says why: nothing yet, or nothing that holds the words searched for', () => {
    const none = (query: string) => find(read(renderConversationItems({ conversations: [], currentId: '', query })), 'li.conversation-none').text;
    expect(none('')).toBe('Your conversations appear here.');
    expect(none('   ')).toBe('Your conversations appear here.');
    expect(none('fox')).toBe('No conversation holds these words.');
    expect(read(renderConversationItems({ conversations: [SUMMARY('a1', 'x')], currentId: '', query: '' })).querySelector('.conversation-none')).toBeNull();
  });

  it('the chat head of a stored conversation offers Rename, Export and Delete, whose question counts its images', () => {
    const head = (imageCount: number) => read(renderChatHead({ id: 'c 1', title: 'Fox "snow"', isNew: false, imageCount }));
    const root = head(0);
    expect(find(root, '#chat-head #conversation-title').text).toBe('Fox "snow"');
    expect(find(root, '#export-link').getAttribute('href')).toBe('/api/conversations/c%201/export');
    expect(find(root, '#export-link').hasAttribute('download')).toBe(true);
    const remove = find(root, '#delete-button');
    expect(remove.attributes).toMatchObject({ 'hx-delete': '/c/c%201', 'hx-swap': 'none' });
    expect(remove.getAttribute('hx-confirm')).toBe('Delete “Fox "snow"”? This cannot be undone; Export keeps a copy.');
    expect(find(head(1), '#delete-button').getAttribute('hx-confirm')).toBe('Delete “Fox "snow"” and its image? This cannot be undone; Export keeps a copy.');
    expect(find(head(3), '#delete-button').getAttribute('hx-confirm')).toBe('Delete “Fox "snow"” and its 3 images? This cannot be undone; Export keeps a copy.');
    const rename = find(root, 'form#rename-form');
    expect(rename.attributes).toMatchObject({ 'hx-patch': '/c/c%201', 'hx-swap': 'none' });
    expect(rename.hasAttribute('hidden')).toBe(true);
    expect(find(rename, '#rename-title').attributes).toMatchObject({ name: 'title', value: 'Fox "snow"', maxlength: '120' });
    expect(find(root, '#rename-button').getAttribute('aria-controls')).toBe('rename-form');
  });

  it('the new-conversation page has only its title: nothing to rename, export or delete yet', () => {
    const root = read(renderChatHead({ id: 'c1', title: 'New conversation', isNew: true, imageCount: 0 }));
    expect(find(root, '#chat-head #conversation-title').text).toBe('New conversation');
    expect(root.querySelectorAll('button, a, form')).toHaveLength(0);
  });

  it('a conversation that came into being removes the start hint, shows its head and is marked in the list', () => {
    const created = renderCreated({ id: 'c9', title: 'Fox', isNew: false, imageCount: 0 });
    expect(targets(created)).toEqual(['#start-new delete', '#chat-head outerHTML', '#current-conversation outerHTML']);
    expect(find(read(created), 'hx-partial[hx-target="#chat-head"] #delete-button').getAttribute('hx-delete')).toBe('/c/c9');
    expect(find(read(created), 'hx-partial[hx-target="#current-conversation"] #current-conversation').getAttribute('value')).toBe('c9');
  });
});

describe('markup', () => {
  it('a message of ours shows each backticked command as code, escapes the rest, and leaves an unpaired backtick as it is', () => {
    expect(String(renderMessage('Run `ollama pull mistral:7b` then <reload>.'))).toBe('Run <code>ollama pull mistral:7b</code> then &lt;reload&gt;.');
    expect(String(renderMessage('`a` and `b`'))).toBe('<code>a</code> and <code>b</code>');
    expect(String(renderMessage('one ` tick <b>'))).toBe('one ` tick &lt;b&gt;');
    expect(String(renderMessage('plain'))).toBe('plain');
  });

  it('a partial names its target and swap; markup given a promise is refused', () => {
    expect(String(renderPartial('#a', 'delete'))).toBe('<hx-partial hx-target="#a" hx-swap="delete"></hx-partial>');
    expect(() => html`${Promise.resolve('x')}`).toThrow(new TypeError('page markup must be synchronous: do not interpolate promises.'));
  });
});

describe('the settings form', () => {
  it('numbers are read from their text, trimmed; other text is passed on for the schema to name', () => {
    expect(readSettingsForm({ steps: ' 30 ', cfg: '6.5', seed: '-1', width: 'wide', height: '' })).toEqual({
      steps: 30,
      cfg: 6.5,
      seed: -1,
      width: 'wide',
      height: '',
      autoGenerate: false,
      autoCheck: false,
    });
    // A field the form did not send is left out (not set to undefined); a non-string is passed on as it is.
    expect(readSettingsForm({ steps: 5 })).toEqual({ steps: 5, autoGenerate: false, autoCheck: false });
    expect(Object.keys(readSettingsForm({}))).toEqual(['autoGenerate', 'autoCheck']);
    expect(readSettingsForm({ steps: 'Infinity' })).toEqual({ steps: 'Infinity', autoGenerate: false, autoCheck: false });
    // Blank is not 0: the schema says the field needs a number.
    expect(readSettingsForm({ seed: '   ' })).toEqual({ seed: '   ', autoGenerate: false, autoCheck: false });
  });

  it('the negative prompt is passed as typed, and the box is on only when checked', () => {
    expect(readSettingsForm({ negativePrompt: '  blurry ' })).toEqual({ negativePrompt: '  blurry ', autoGenerate: false, autoCheck: false });
    expect(readSettingsForm({ autoGenerate: 'on' }).autoGenerate).toBe(true);
    expect(readSettingsForm({ autoGenerate: 'true' }).autoGenerate).toBe(true);
    expect(readSettingsForm({ autoGenerate: 'off' }).autoGenerate).toBe(false);
    expect(readSettingsForm({ autoGenerate: '' }).autoGenerate).toBe(false);
    // "Check each new picture" is a box like it; "Correct it up to" a number.
    expect(readSettingsForm({ autoCheck: 'on', autoRefine: '2' })).toMatchObject({ autoCheck: true, autoRefine: 2 });
    expect(readSettingsForm({}).autoCheck).toBe(false);
  });

  it('the model choices: \'\' is the default (null), a name is passed on; unchanged or untouched ones are left out', () => {
    expect(readSettingsForm({ chatModel: '', checkpoint: 'a.safetensors', family: 'flux' })).toEqual({ chatModel: null, checkpoint: 'a.safetensors', family: 'flux', autoGenerate: false, autoCheck: false });
    const patch = { steps: 3, chatModel: 'llava:7b', checkpoint: null, family: 'flux' };
    expect(withoutUnchangedChoices(patch, { chatModel: 'llava:7b', checkpoint: null, family: null })).toEqual({ steps: 3, family: 'flux' });
    expect(withoutUnchangedChoices(patch, undefined, ['steps', 'chatModel'])).toEqual({ steps: 3, chatModel: 'llava:7b' });
  });
});

describe('send keys', () => {
  it('a key is 16 to 64 letters, digits, - or _', () => {
    expect(isSendKey('a'.repeat(16))).toBe(true);
    expect(isSendKey('A-_9'.repeat(16))).toBe(true);
    expect(isSendKey('a'.repeat(15))).toBe(false);
    expect(isSendKey('a'.repeat(65))).toBe(false);
    expect(isSendKey(`${'a'.repeat(16)}!`)).toBe(false);
    expect(isSendKey(12345678901234567)).toBe(false);
  });

  it('a key is claimed once; past the capacity the oldest key is forgotten, and only it', () => {
    const guard = createSendGuard(2);
    expect(guard.claim('k1')).toBe(true);
    expect(guard.claim('k1')).toBe(false);
    expect(guard.claim('k2')).toBe(true);
    expect(guard.claim('k2')).toBe(false);
    expect(guard.claim('k1')).toBe(false);
    expect(guard.claim('k3')).toBe(true);
    // k1 went to make room for k3; k2 and k3 are still known.
    expect(guard.claim('k2')).toBe(false);
    expect(guard.claim('k3')).toBe(false);
    expect(guard.claim('k1')).toBe(true);
  });
});

describe('assets', () => {
  // The page's script modules: every web/js/*.js, served beside easel.js, which imports them.
  const MODULES = readdirSync(fileURLToPath(new URL('../../../web/js/', import.meta.url))).filter((name) => name.endsWith('.js'));

  it('each file has the content type of its extension and an ETag from its bytes', () => {
    const assets = loadAssets();
    expect(MODULES.length).toBeGreaterThan(0);
    expect(Object.fromEntries([...assets].map(([name, asset]) => [name, asset.contentType]))).toEqual({
      'htmx.min.js': 'text/javascript; charset=utf-8',
      'htmx.min.js.map': 'application/json; charset=utf-8',
      'hx-sse.min.js': 'text/javascript; charset=utf-8',
      'hx-sse.min.js.map': 'application/json; charset=utf-8',
      'easel.css': 'text/css; charset=utf-8',
      'easel.js': 'text/javascript; charset=utf-8',
      'favicon.svg': 'image/svg+xml',
      ...Object.fromEntries(MODULES.map((name) => [name, 'text/javascript; charset=utf-8'])),
      // Made at start from the server's own estimate (token-estimate.test.ts).
      'token-estimate.js': 'text/javascript; charset=utf-8',
    });
    for (const asset of assets.values()) {
      expect(asset.body.length).toBeGreaterThan(0);
      expect(asset.etag).toBe(`"${createHash('sha256').update(asset.body).digest('base64url').slice(0, 22)}"`);
    }
    expect(new Set([...assets.values()].map((asset) => asset.etag)).size).toBe(assets.size);
  });

  it('every module the page imports is served beside easel.js, at /assets/<name>.js', () => {
    const assets = loadAssets();
    const imported = new Set<string>();
    for (const name of ['easel.js', ...MODULES]) {
      const source = new TextDecoder().decode(assets.get(name)?.body);
      for (const [, specifier = ''] of source.matchAll(/^import\s[^'"]*['"]([^'"]+)['"]/gm)) {
        expect(specifier).toMatch(/^\.\/[\w-]+\.js$/);
        expect(assets.has(specifier.slice(2)), `${name} imports ${specifier}`).toBe(true);
        imported.add(specifier.slice(2));
      }
    }
    // Each module is reached from the entry: none is served and never loaded.
    expect([...imported].sort()).toEqual([...MODULES, 'token-estimate.js'].sort());
  });
});
