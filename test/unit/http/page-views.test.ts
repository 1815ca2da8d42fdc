// The whole page and its bubbles as a reload renders them from the store, read as HTML (node-html-parser):
// every turn's state, the images in their places, the settings panel, the status line and the small answers
// (saved, refused). The browser suite sees the same page in Chromium; these run in milliseconds.
import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, describeFamily, type ConversationView, type ImageRecord, type TranscriptTurn } from '../../../server/core/index.ts';
import {
  isImageUrl,
  renderAssistantBubble,
  renderErrorBox,
  renderGeneratedEntry,
  renderImage,
  renderImageNote,
  renderSendAgain,
  renderThumbnail,
  renderTime,
  renderUserBubble,
} from '../../../server/http/page/bubbles.ts';
import {
  renderComposerStatus,
  renderConversationPage,
  renderConversationSwitch,
  renderGenerateButton,
  renderMissingPage,
  renderMissingPart,
  renderPromptSaved,
  renderSettingsSaved,
  renderStatus,
  type PageModel,
} from '../../../server/http/page/views.ts';
import { find, partials, read, targets, texts } from '../../helpers/html.ts';
import { makeImageRecord } from '../../helpers/records.ts';

let nextId = 1;
function turn(role: 'user' | 'assistant', text: string, over: Partial<TranscriptTurn> = {}): TranscriptTurn {
  const id = nextId++;
  return { id, role, text, status: 'ok', images: [], createdAt: `2026-11-26T10:${String(id).padStart(2, '0')}:00.000Z`, ...over };
}

function conversation(over: Partial<ConversationView> = {}): ConversationView {
  return {
    id: 'c1',
    title: 'Fox <b>',
    createdAt: '2026-11-26T10:00:00.000Z',
    updatedAt: '2026-11-26T10:30:00.000Z',
    preview: '',
    prompt: 'a fox',
    settings: DEFAULT_SETTINGS,
    turns: [],
    images: [],
    checks: [],
    pane: { paneRevision: 3, prompt: 'a fox', promptVersion: 2, suggestion: null, settings: DEFAULT_SETTINGS, pinned: [], settingSuggestions: {}, canUndo: true, canRedo: false, family: describeFamily(DEFAULT_SETTINGS, null) },
    generating: [],
    ...over,
  };
}

function model(view: ConversationView, over: Partial<PageModel> = {}): PageModel {
  return {
    conversation: view,
    isNew: false,
    busy: false,
    library: { conversations: [], currentId: view.id, query: '' },
    imageStatus: { configured: true, detail: 'AUTOMATIC1111 answers.' },
    ...over,
  };
}

const page = (view: ConversationView, over: Partial<PageModel> = {}) => read(renderConversationPage(model(view, over)));

describe('the page of a conversation', () => {
  it('the document loads only our own assets, with htmx configured for SSE and a reload as history', () => {
    const markup = String(renderConversationPage(model(conversation())));
    expect(markup.startsWith('<!doctype html>\n<html lang="en">')).toBe(true);
    const root = read(markup);
    expect(find(root, 'title').text).toBe('Fox <b> · Easel');
    expect(root.querySelectorAll('script').map((script) => script.getAttribute('src'))).toEqual(['/assets/htmx.min.js', '/assets/hx-sse.min.js', '/assets/easel.js']);
    expect(JSON.parse(find(root, 'meta[name="htmx-config"]').getAttribute('content')!)).toEqual({ includeIndicatorCSS: false, history: 'reload', extensions: 'sse' });
    expect(find(root, 'link[rel="stylesheet"]').getAttribute('href')).toBe('/assets/easel.css');
    expect(find(root, '#status').attributes).toMatchObject({ 'hx-get': '/status', 'hx-trigger': 'load, every 30s, easel:status from:body' });
    expect(find(root, '#status').text).toBe('Checking Ollama…');
  });

  it('the body starts with "Skip to the conversation", a link past the top bar and the library to the focusable log', () => {
    const root = page(conversation({ turns: [turn('user', 'one'), turn('assistant', 'two')] }), { library: { conversations: [], currentId: 'c1', query: '' } });
    const first = find(root, 'body').childNodes.find((node) => node.nodeType === 1);
    expect(first?.toString()).toBe('<a href="#log" class="skip-link">Skip to the conversation</a>');
    expect(find(root, '#log').attributes).toMatchObject({ tabindex: '0', 'aria-label': 'Conversation' });
    // Before the library and everything else that takes the focus.
    const markup = String(renderConversationPage(model(conversation())));
    expect(markup.indexOf('Skip to the conversation')).toBeLessThan(markup.indexOf('id="library"'));
    expect(markup.indexOf('Skip to the conversation')).toBeLessThan(markup.indexOf('<button'));
  });

  it('an empty conversation invites a first message; the new page marks its first send as creating it', () => {
    const root = page(conversation(), { isNew: true });
    expect(find(root, '#log #log-empty').text).toMatch(/^Describe the picture you have in mind/);
    expect(find(root, '#composer #start-new').attributes).toMatchObject({ name: 'startNew', value: '1' });
    expect(page(conversation()).querySelector('#start-new')).toBeNull();
    expect(find(root, '#composer').getAttribute('hx-post')).toBe('/c/c1/messages');
    expect(find(root, '#replace-last').hasAttribute('disabled')).toBe(true);
    expect(find(root, '#stop').getAttribute('hx-post')).toBe('/c/c1/stop');
    expect(find(root, '#regenerate-form').getAttribute('hx-post')).toBe('/c/c1/regenerate');
    expect(find(root, '#resend-form').getAttribute('hx-post')).toBe('/c/c1/messages');
    expect(find(root, 'main#conversation').getAttribute('data-conversation-id')).toBe('c1');
  });

  it("a reply cut off mid-way shows no unfinished marker after a reload, its stored text unchanged; its headings rank below the page's", () => {
    const stopped = turn('assistant', 'Nice idea! I imagine **slo', { status: 'stopped' });
    const root = page(conversation({ turns: [turn('user', 'a lantern'), turn('assistant', '# Ideas\n\n## Light\n\nwarm'), turn('user', 'more'), stopped] }));
    expect(find(root, `#turn-${stopped.id}-text`).innerHTML).toBe('<p>Nice idea! I imagine slo</p>');
    expect(stopped.text).toBe('Nice idea! I imagine **slo');
    // The page's h1 is Easel's alone; a reply's # and ## are h3 and h4, under the sections' h2.
    expect(texts(root, 'h1')).toEqual([' Easel']);
    expect(texts(root, '.text.md h3, .text.md h4').map((text) => text.trim())).toEqual(['Ideas', 'Light']);
    expect(root.querySelectorAll('.text.md h1, .text.md h2')).toHaveLength(0);
  });

  it('a transcript: Edit on the last message, Regenerate on the last reply, both only when no reply is running', () => {
    const view = conversation({ turns: [turn('user', 'one'), turn('assistant', 'first **reply**'), turn('user', 'two <i>'), turn('assistant', 'second')] });
    const root = page(view);
    expect(texts(root, 'article.msg.user .text')).toEqual(['one', 'two <i>']);
    expect(find(root, 'article.msg.assistant .text.md strong').text).toBe('reply');
    expect(root.querySelectorAll('.edit-message')).toHaveLength(1);
    expect(root.querySelectorAll('article.msg.user')[1]!.querySelector('.edit-message')).not.toBeNull();
    expect(root.querySelectorAll('.regenerate-button')).toHaveLength(1);
    expect(root.querySelectorAll('article.msg.assistant')[1]!.querySelector('.regenerate-button')).not.toBeNull();
    // Copy on every bubble, named for what it copies, and each one's time.
    expect(root.querySelectorAll('.copy-message').map((button) => [button.text, button.getAttribute('aria-label')])).toEqual([
      ['Copy', 'Copy your message'],
      ['Copy', 'Copy this reply'],
      ['Copy', 'Copy your message'],
      ['Copy', 'Copy this reply'],
    ]);
    expect(find(root, `#turn-${view.turns[0]!.id} time`).getAttribute('datetime')).toBe(view.turns[0]!.createdAt);

    const busy = page(view, { busy: true });
    expect(busy.querySelectorAll('.edit-message, .regenerate-button')).toHaveLength(0);
  });

  it('each state of a stored reply says what happened to it', () => {
    const view = conversation({
      turns: [
        turn('user', 'a'),
        turn('assistant', 'cut', { status: 'stopped', notices: ['A notice.'] }),
        turn('user', 'b'),
        turn('assistant', 'half', { status: 'interrupted' }),
        turn('user', 'c'),
        turn('assistant', 'so far', { status: 'running' }),
      ],
    });
    const notices = texts(page(view), '.notes .notice');
    expect(notices).toEqual(['A notice.', 'Stopped.', 'Interrupted: Easel stopped before this reply was finished. Regenerate asks again.']);
    // A running reply goes on live: its text so far in a bubble still being written (the typing dots), no Regenerate.
    expect(page(view).querySelectorAll('.regenerate-button')).toHaveLength(0);
    const running = page(view).querySelectorAll('article.msg.assistant').at(-1);
    expect(running?.getAttribute('aria-busy')).toBe('true');
    expect(running?.querySelector('.md-live')?.text).toBe('so far');
    expect(running?.querySelector('.typing')).not.toBeNull();
  });

  it('a failed last reply offers Retry instead of Regenerate; an earlier one neither', () => {
    const failed = (extra: TranscriptTurn[]) =>
      page(conversation({ turns: [turn('user', 'a'), turn('assistant', '', { status: 'error', error: { code: 'ollama_unreachable', message: 'Run `ollama serve`.' } }), ...extra] }));
    const last = failed([]);
    expect(find(last, '.error-box .error-text code').text).toBe('ollama serve');
    expect(last.querySelectorAll('.retry-button')).toHaveLength(1);
    expect(last.querySelectorAll('.regenerate-button')).toHaveLength(0);
    const earlier = failed([turn('user', 'b'), turn('assistant', 'fine')]);
    expect(earlier.querySelectorAll('.retry-button')).toHaveLength(0);
    expect(earlier.querySelectorAll('.error-box')).toHaveLength(1);
    expect(earlier.querySelectorAll('.regenerate-button')).toHaveLength(1);
  });

  it('a reset reply is followed by the fresh-start divider, and the last one offers to send its message again', () => {
    const view = conversation({ turns: [turn('user', 'my "long" message'), turn('assistant', 'Starting fresh.', { status: 'reset' })] });
    const root = page(view);
    expect(find(root, '.send-again .send-again-button').getAttribute('data-text')).toBe('my "long" message');
    expect(find(root, `#turn-${view.turns[1]!.id} + .divider`).getAttribute('aria-label')).toBe('Fresh start');
    expect(root.querySelectorAll('.regenerate-button')).toHaveLength(0);
    const later = page(conversation({ turns: [...view.turns, turn('user', 'next'), turn('assistant', 'ok')] }));
    expect(later.querySelectorAll('.send-again')).toHaveLength(0);
    expect(later.querySelectorAll('.divider')).toHaveLength(1);
  });

  it('a replaced turn is shown dimmed and labelled, without controls; its message is not the one sent again', () => {
    const view = conversation({
      turns: [
        turn('user', 'first try', { status: 'replaced' }),
        turn('assistant', 'old', { status: 'replaced', error: { code: 'internal_error', message: 'Failed.' }, imageNote: { reason: 'auto_off', message: 'No prompt.' } }),
        turn('user', 'second try'),
        turn('assistant', 'Reset.', { status: 'reset' }),
      ],
    });
    const root = page(view);
    expect(root.querySelectorAll('article.msg.replaced')).toHaveLength(2);
    expect(texts(root, 'article.msg.replaced .replaced-label')).toEqual(['Replaced', 'Replaced']);
    expect(root.querySelectorAll('article.msg.replaced .edit-message, article.msg.replaced .retry-button, article.msg.replaced .image-note')).toHaveLength(0);
    expect(find(root, '.send-again-button').getAttribute('data-text')).toBe('second try');
    // The last shown message is the second; Edit is on it.
    expect(find(root, `#turn-${view.turns[2]!.id} .edit-message`)).toBeTruthy();
  });

  it('"ready but no image" says why, with Generate on the last reply only, and never for a missing backend', () => {
    const note = (reason: 'auto_off' | 'no_backend', last: boolean) => {
      const turns = [turn('user', 'a'), turn('assistant', 'Ready.', { imageNote: { reason, message: `Because \`${reason}\`.` } })];
      return page(conversation({ turns: last ? turns : [...turns, turn('user', 'b'), turn('assistant', 'c')] }));
    };
    const last = note('auto_off', true);
    expect(find(last, '.image-note').getAttribute('data-reason')).toBe('auto_off');
    expect(find(last, '.image-note-text code').text).toBe('auto_off');
    expect(find(last, '.note-generate').attributes).toMatchObject({ type: 'submit', form: 'generate-form' });
    expect(note('auto_off', false).querySelectorAll('.note-generate')).toHaveLength(0);
    expect(note('no_backend', true).querySelectorAll('.note-generate')).toHaveLength(0);
  });

  it('Generate\'s images sit between the turns where they were made, in order, and the newest fills the image area', () => {
    const t = [turn('user', 'a'), turn('assistant', 'b'), turn('user', 'c'), turn('assistant', 'd')];
    const at = (turnIndex: number, seconds: number) => `${t[turnIndex]!.createdAt.slice(0, 17)}${String(seconds).padStart(2, '0')}.000Z`;
    const images: ImageRecord[] = [
      makeImageRecord({ id: 'i1', url: '/images/one.png', prompt: 'first', createdAt: at(0, 30) }),
      makeImageRecord({ id: 'i2', url: '/images/two.png', prompt: 'second', createdAt: at(1, 30) }),
      makeImageRecord({ id: 'i3', url: '/images/three.png', prompt: 'third', createdAt: at(1, 40) }),
      makeImageRecord({ id: 'i4', url: '/images/four.png', prompt: 'last', createdAt: at(3, 30), seed: 9, model: 'sdxl' }),
    ];
    const root = page(conversation({ turns: t, images }));
    const order = root.querySelectorAll('#log > article').map((article) => (article.classList.contains('generated') ? find(article, '.generated-prompt').text : find(article, '.text').text));
    expect(order).toEqual(['a', 'first', 'b', 'second', 'third', 'c', 'd', 'last']);
    expect(find(root, '#image-frame img.current-image').getAttribute('src')).toBe('/images/four.png');
    expect(find(root, '#image-frame .image-caption').text).toBe('Seed 9 · 8 × 8 · sdxl · Download');
  });

  it('every image still being made shows its block: an automatic one follows it into its reply, Generate\'s into the chat', () => {
    const view = conversation({
      turns: [turn('user', 'a'), turn('assistant', 'b')],
      generating: [
        { id: 'g1', turnId: 7, prompt: 'x', queued: false, progress: { step: 2, steps: 4 } },
        { id: 'g2', turnId: null, prompt: 'y', queued: true },
      ],
    });
    const root = page(view);
    expect(root.querySelectorAll('#image-status .generation').map((block) => block.id)).toEqual(['generation-g1', 'generation-g2']);
    expect(find(root, '#generation-g1 .image-follower').getAttribute('hx-get')).toBe('/c/c1/images/g1/events?bubble=turn-7&skip=');
    // Generate's image outlives the page that asked for it: a reload follows it too, into the chat. `skip`: none of
    // its pictures is shown yet.
    expect(find(root, '#generation-g2 .image-follower').getAttribute('hx-get')).toBe('/c/c1/images/g2/events?skip=');
    expect(find(root, '#generation-g2-state').text).toBe('Waiting for the image backend: another image is being made first.');
    expect(find(root, '#generation-g1-bar').getAttribute('aria-valuenow')).toBe('50');
    expect(find(root, '#generation-g1-state').text).toBe('Making the image…');
  });

  it('a conversation with only Generate\'s images shows them, not the invitation to start', () => {
    const root = page(conversation({ images: [makeImageRecord({ url: '/images/one.png', prompt: 'only' })] }));
    expect(root.querySelector('#log-empty')).toBeNull();
    expect(find(root, '#log article.generated .generated-prompt').text).toBe('only');
  });

  it('an image of a reply stays in its reply, not among Generate\'s entries; one made as a turn began comes after it', () => {
    const t = [turn('user', 'a'), turn('assistant', 'b', { images: [makeImageRecord({ id: 'r', url: '/images/reply.png', turnId: 0 })] })];
    const images = [makeImageRecord({ id: 'r', url: '/images/reply.png', turnId: t[1]!.id, createdAt: t[0]!.createdAt }), makeImageRecord({ id: 'g', url: '/images/same.png', prompt: 'same time', createdAt: t[1]!.createdAt })];
    const root = page(conversation({ turns: t, images }));
    expect(root.querySelectorAll('#log article.generated').map((entry) => find(entry, '.generated-prompt').text)).toEqual(['same time']);
    expect(root.querySelectorAll('#log > article').map((article) => article.classList.contains('generated'))).toEqual([false, false, true]);
  });

  it('no image yet: a placeholder', () => {
    expect(find(page(conversation()), '#image-frame .placeholder').text).toBe('No image yet.');
  });
});

describe('the prompt pane and the settings on the page', () => {
  it('the prompt with its version, Undo/Redo, Generate posting the prompt and settings', () => {
    const root = page(conversation());
    const prompt = find(root, 'textarea#prompt');
    expect(prompt.text).toBe('a fox');
    expect(prompt.attributes).toMatchObject({ 'hx-put': '/c/c1/prompt', 'data-version': '2', 'data-max-chars': '2000' });
    expect(find(root, '#generate-form').attributes).toMatchObject({ 'hx-post': '/c/c1/generations', 'hx-include': '#prompt, #settings-form' });
    expect(find(root, '#generate').hasAttribute('disabled')).toBe(false);
    expect(find(root, '#generate-help').text).toBe('Generate makes an image from this prompt and the settings below.');
    expect(find(root, '#generate-empty').hasAttribute('hidden')).toBe(true);
    expect(find(root, '#prompt-undo').hasAttribute('disabled')).toBe(false);
    expect(find(root, '#prompt-redo').hasAttribute('disabled')).toBe(true);
    expect(find(root, '#prompt-count').getAttribute('data-token-limit')).toBe('75');
    expect(prompt.getAttribute('placeholder')).toBe('The image prompt appears here once the assistant has one. You can edit it at any time.');
  });

  it('an empty prompt, or no backend, leaves Generate disabled and says why', () => {
    // A prompt never set has no version.
    expect(find(page(conversation({ pane: { ...conversation().pane, promptVersion: null } })), 'textarea#prompt').getAttribute('data-version')).toBe('');
    const empty = page(conversation({ prompt: '  ' }));
    expect(find(empty, '#generate').hasAttribute('disabled')).toBe(true);
    expect(find(empty, '#generate').getAttribute('data-backend-ready')).toBe('yes');
    expect(find(empty, '#generate-empty').hasAttribute('hidden')).toBe(false);
    const none = page(conversation(), { imageStatus: { configured: false, detail: 'Start one with `--image-url`.' } });
    expect(find(none, '#generate').hasAttribute('disabled')).toBe(true);
    expect(find(none, '#generate').getAttribute('data-backend-ready')).toBe('no');
    expect(find(none, '#generate-help code').text).toBe('--image-url');
  });

  it('the settings panel: each field with its bounds, the size preset chosen, the box, pins and suggestions', () => {
    const settings = { ...DEFAULT_SETTINGS, steps: 28, cfg: 5.5, seed: 12, width: 768, height: 512, negativePrompt: 'blur <x>', autoGenerate: true };
    const root = page(
      conversation({ settings, pane: { ...conversation().pane, settings, pinned: ['cfg'], settingSuggestions: { cfg: 8 } } }),
    );
    expect(find(root, '#settings-form').attributes).toMatchObject({ 'hx-put': '/c/c1/settings', 'hx-trigger': 'change' });
    const input = (name: string) => find(root, `#setting-${name}`).attributes;
    expect(input('steps')).toMatchObject({ name: 'steps', type: 'number', value: '28', min: '1', max: '150', step: '1' });
    expect(input('cfg')).toMatchObject({ value: '5.5', min: '0', max: '30', step: '0.5' });
    expect(input('seed')).toMatchObject({ value: '12', min: '-1', step: '1' });
    expect(input('width')).toMatchObject({ value: '768', min: '64', max: '2048', step: '8' });
    expect(input('height')).toMatchObject({ value: '512', step: '8' });
    expect(find(root, '#setting-negativePrompt').text).toBe('blur <x>');
    expect(find(root, '#setting-autoGenerate').hasAttribute('checked')).toBe(true);
    // The presets are the family's trained sizes (SD 1.5 here), and Custom.
    expect(find(root, '#size-preset option[selected]').text).toBe('Landscape 768 × 512');
    expect(root.querySelectorAll('#size-preset option')).toHaveLength(6);
    expect(find(root, '#meta-cfg .pin')).toBeTruthy();
    expect(find(root, '#meta-cfg .setting-suggestion').text).toBe('Assistant suggests 8');
    // Width, height and the box are not the model's: no note beside them.
    expect(root.querySelectorAll('#meta-width, #meta-height, #meta-autoGenerate')).toHaveLength(0);
    expect(root.querySelectorAll('.field-error').map((slot) => slot.id)).toEqual(
      expect.arrayContaining(['error-steps', 'error-cfg', 'error-seed', 'error-width', 'error-height', 'error-negativePrompt', 'error-autoGenerate']),
    );

    expect(root.querySelectorAll('#settings-form label').map((label) => `${label.getAttribute('for')}=${label.text}`)).toEqual([
      'setting-chatModel=Chat model',
      'setting-visionModel=Vision model',
      'pull-name=Pull a model from Ollama\'s library',
      'setting-checkpoint=Checkpoint',
      'setting-family=Family',
      'setting-steps=Steps',
      'setting-cfg=CFG',
      'setting-seed=Seed',
      'size-preset=Size',
      'setting-width=Width',
      'setting-height=Height',
      'setting-negativePrompt=Negative prompt',
      'setting-autoGenerate=Generate automatically when the assistant is ready',
      'setting-autoCheck=Check each new picture',
      'setting-autoRefine=Correct it up to',
    ]);
    expect(find(root, '.field-seed #random-seed').text).toBe('Random');
    expect(find(root, '#random-seed').getAttribute('title')).toBe('Set the seed to -1: a new random seed for every image');
    const custom = page(conversation({ settings: { ...DEFAULT_SETTINGS, width: 640, height: 640, autoGenerate: false } }));
    expect(custom.querySelectorAll('#size-preset option[selected]')).toHaveLength(0);
    expect(find(custom, '#setting-autoGenerate').hasAttribute('checked')).toBe(false);
  });

  it('the large view has a row for every setting and its actions', () => {
    const root = page(conversation());
    expect(root.querySelectorAll('#image-dialog dd').map((row) => row.id)).toEqual([
      'image-dialog-prompt',
      'image-dialog-negative-prompt',
      'image-dialog-steps',
      'image-dialog-cfg',
      'image-dialog-seed',
      'image-dialog-size',
      'image-dialog-model',
    ]);
    expect(texts(root, '#image-dialog dt')).toEqual(['Prompt', 'Negative prompt', 'Steps', 'CFG', 'Seed', 'Size', 'Model']);
    expect(texts(root, '#image-dialog .dialog-actions button, #image-dialog .dialog-actions a')).toEqual(['Use these settings', 'Reuse seed', 'Vary (subtle)', 'Vary (strong)', 'Download']);
    // Vary submits the prompt pane's Generate form; the view gives it the shown image's id.
    for (const id of ['dialog-vary-subtle', 'dialog-vary-strong']) {
      expect(root.querySelector(`#${id}`)?.attributes).toMatchObject({ type: 'submit', form: 'generate-form', name: 'from', 'aria-describedby': 'vary-help' });
    }
  });

  it('a switch answers the conversation\'s part, its title, and the list with it marked', () => {
    const view = conversation();
    const markup = renderConversationSwitch(model(view, { library: { conversations: [{ id: 'c1', title: 'Fox', createdAt: view.createdAt, updatedAt: view.updatedAt, preview: '' }], currentId: 'c1', query: '' } }));
    const root = read(markup);
    expect(find(root, 'title').text).toBe('Fox <b> · Easel');
    expect(find(root, 'main#conversation').getAttribute('data-conversation-id')).toBe('c1');
    expect(targets(markup)).toEqual(['#conversation-list innerMorph', '#current-conversation outerHTML']);
    expect(find(root, 'hx-partial[hx-target="#conversation-list"] #item-c1 a').getAttribute('aria-current')).toBe('page');
  });
});

describe('the status line', () => {
  const ready = { reachable: true, version: '0.12.0', model: 'mistral:7b', modelAvailable: true };

  it('says Ollama and the image backend are ready', () => {
    const root = read(renderStatus(ready, { configured: true, detail: 'AUTOMATIC1111 answers.' }));
    expect(root.querySelectorAll('.state').map((state) => [state.classList.value.join(' '), state.text])).toEqual([
      ['state ok', 'Ollama 0.12.0 is ready with mistral:7b.'],
      ['state ok', 'AUTOMATIC1111 answers.'],
    ]);
  });

  it('names what to run when Ollama is down, the model missing, or something else is wrong', () => {
    const problem = (health: Partial<typeof ready> & { remedy?: string; problem?: string }) => find(read(renderStatus({ ...ready, ...health }, { configured: false, detail: '' })), '.state.warn');
    expect(problem({ reachable: false }).text).toBe('Ollama is not reachable: run ollama serve.');
    expect(find(problem({ reachable: false }), 'code').text).toBe('ollama serve');
    expect(problem({ modelAvailable: false }).text).toBe('The model mistral:7b is not pulled: run ollama pull mistral:7b.');
    expect(problem({ modelAvailable: false, remedy: 'ollama serve --new', problem: 'Too old.' }).text).toBe('Ollama is not ready: run ollama serve --new.');
    // The whole explanation is in the title.
    expect(problem({ modelAvailable: false }).getAttribute('title')).toBe('The model mistral:7b is not pulled. Fix: run `ollama pull mistral:7b`.');
  });

  it('says when no image backend is configured, or when it does not answer (with its address)', () => {
    const image = (status: { configured: boolean; detail: string; reachable?: boolean; url?: string | null }) => read(renderStatus(ready, status)).querySelectorAll('.state')[1]!;
    expect(image({ configured: false, detail: 'x' }).text).toBe('No image backend is configured: Easel crafts prompts only.');
    expect(image({ configured: false, detail: 'x' }).classList.contains('off')).toBe(true);
    const down = image({ configured: true, detail: 'Connection refused.', reachable: false, url: 'http://127.0.0.1:7860' });
    expect(down.text).toBe('The image backend at http://127.0.0.1:7860 is not answering.');
    expect(down.getAttribute('title')).toBe('Connection refused.');
    expect(image({ configured: true, detail: 'x', reachable: false, url: null }).text).toBe('The image backend is not answering.');
  });
});

describe('small answers', () => {
  it('a missing conversation: a page of its own, or the conversation\'s part', () => {
    const full = read(renderMissingPage());
    expect(find(full, 'title').text).toBe('Easel: conversation not found');
    expect(find(full, 'body.missing a.button').getAttribute('href')).toBe('/');
    const part = read(renderMissingPart());
    expect(find(part, 'title').text).toBe('Easel: conversation not found');
    expect(find(part, 'main#conversation.missing-part p').text).toBe('It may have been deleted in another tab. Pick another one, or start a new one.');
  });

  it('a prompt save: the error beside the field, or "Saved."; each answer clears the other slot', () => {
    expect(partials(renderPromptSaved('Too long <b>.'))).toEqual([
      { target: '#prompt-error', swap: 'innerHTML', text: 'Too long <b>.' },
      { target: '#prompt-saved', swap: 'innerHTML', text: '' },
    ]);
    expect(partials(renderPromptSaved(undefined)).map((p) => p.text)).toEqual(['', 'Saved.']);
  });

  it('a settings answer fills or clears each field\'s slot and the summary', () => {
    const said = partials(renderSettingsSaved({ cfg: 'CFG must be at most 30.' }, 'Not saved.'));
    expect(said.every((p) => p.swap === 'innerHTML')).toBe(true);
    expect(said.map((p) => `${p.target}=${p.text}`)).toEqual([
      '#error-chatModel=',
      '#error-checkpoint=',
      '#error-sampler=',
      '#error-scheduler=',
      '#error-family=',
      '#error-visionModel=',
      '#error-steps=',
      '#error-cfg=CFG must be at most 30.',
      '#error-seed=',
      '#error-width=',
      '#error-height=',
      '#error-negativePrompt=',
      '#error-autoGenerate=',
      '#error-autoCheck=',
      '#error-autoRefine=',
      '#settings-status=Not saved.',
    ]);
  });

  it('the composer\'s status is an error span, escaped', () => {
    expect(String(renderComposerStatus('No <b>'))).toBe('<hx-partial hx-target="#composer-status" hx-swap="innerHTML"><span class="composer-error">No &lt;b&gt;</span></hx-partial>');
  });

  it('Generate is enabled only with a backend and a prompt', () => {
    const state = (ready: boolean, empty: boolean) => find(read(renderGenerateButton(ready, empty)), '#generate').hasAttribute('disabled');
    expect([state(true, false), state(true, true), state(false, false), state(false, true)]).toEqual([false, true, true, true]);
  });
});

describe('bubbles', () => {
  it('a user bubble: its text escaped, its time, Copy, and Edit when it is the last message', () => {
    const root = read(renderUserBubble('<b>hi</b>', { id: 'turn-1', createdAt: '2026-11-26T10:05:09.000Z', last: true }));
    expect(find(root, 'article#turn-1.msg.user .text').text).toBe('<b>hi</b>');
    expect(find(root, 'time.msg-time').text).toBe('2026-11-26 10:05');
    expect(texts(root, '.msg-actions button')).toEqual(['Copy', 'Edit']);
    expect(read(renderUserBubble('x')).querySelectorAll('time, .edit-message, [id]')).toHaveLength(0);
    expect(read(renderUserBubble('x', { last: true, replaced: true })).querySelectorAll('.edit-message')).toHaveLength(0);
  });

  it('an assistant bubble streams as an empty live block with typing dots, busy; a stored one is Markdown with Copy', () => {
    const streaming = read(renderAssistantBubble('reply-1', { streaming: true }));
    expect(find(streaming, 'article#reply-1').getAttribute('aria-busy')).toBe('true');
    expect(find(streaming, '#reply-1-text > #reply-1-live.md-live').text).toBe('');
    expect(find(streaming, '#reply-1-cursor.typing').getAttribute('aria-hidden')).toBe('true');
    expect(streaming.querySelectorAll('.copy-message')).toHaveLength(0);
    const done = read(renderAssistantBubble('reply-1', { text: '*hi*', createdAt: '2026-11-26T10:05:00.000Z' }));
    expect(find(done, 'article#reply-1').hasAttribute('aria-busy')).toBe(false);
    expect(find(done, '#reply-1-text em').text).toBe('hi');
    expect(done.querySelectorAll('.typing, .md-live')).toHaveLength(0);
    expect(texts(done, '#reply-1-actions button')).toEqual(['Copy']);
    expect(find(done, '#reply-1-actions time').getAttribute('datetime')).toBe('2026-11-26T10:05:00.000Z');
    expect(find(read(renderAssistantBubble('reply-1')), '#reply-1-text').text).toBe('');
  });

  it('a time is shown as minutes in UTC until the page rewrites it; its class can be chosen', () => {
    expect(String(renderTime('2026-11-26T09:08:07.000Z', 'conversation-time'))).toBe('<time class="conversation-time" datetime="2026-11-26T09:08:07.000Z">2026-11-26 09:08</time>');
  });

  it('an error box offers Retry only when asked; the note of an unmade image names its reason', () => {
    expect(read(renderErrorBox('Failed.', { retry: true })).querySelectorAll('.retry-button')).toHaveLength(1);
    expect(read(renderErrorBox('Failed.', { retry: false })).querySelectorAll('.retry-button')).toHaveLength(0);
    expect(find(read(renderErrorBox('Failed.', { retry: false })), '.error-box').getAttribute('role')).toBe('alert');
    expect(read(renderImageNote({ reason: 'auto_off', message: 'm' }, false)).querySelectorAll('.note-generate')).toHaveLength(0);
    expect(find(read(renderSendAgain('a "b"')), '.send-again-button').getAttribute('data-text')).toBe('a "b"');
  });

  it('a thumbnail carries the image\'s settings for the large view, a readable download name and a cut alt text', () => {
    const image = makeImageRecord({ url: '/images/abc.png', prompt: `${'p'.repeat(120)}tail`, negativePrompt: 'blur', seed: 5, steps: 20, cfg: 7, model: 'sdxl', width: 512, height: 768 });
    const root = read(renderThumbnail(image));
    const button = find(root, 'button.thumb');
    expect(button.attributes).toMatchObject({
      'data-url': '/images/abc.png',
      'data-prompt': image.prompt,
      'data-seed': '5',
      'data-negative-prompt': 'blur',
      'data-steps': '20',
      'data-cfg': '7',
      'data-model': 'sdxl',
      'data-width': '512',
      'data-height': '768',
    });
    expect(button.getAttribute('data-download')).toMatch(/^easel-5-p+\.png$/);
    expect(find(root, 'img').getAttribute('alt')).toBe(`Image: ${'p'.repeat(120)}…`);
    expect(find(root, 'a.download').getAttribute('download')).toBe(button.getAttribute('data-download'));
    const bare = find(read(renderThumbnail(makeImageRecord({ url: '/images/a.png', seed: null, steps: null, cfg: null, model: null }))), 'button.thumb');
    expect(['data-seed', 'data-steps', 'data-cfg', 'data-model'].filter((name) => bare.hasAttribute(name))).toEqual([]);
    expect(find(read(renderThumbnail(makeImageRecord({ url: '/images/a.png', prompt: 'short' }))), 'img').getAttribute('alt')).toBe('Image: short');
    expect(find(read(renderThumbnail(makeImageRecord({ url: '/images/a.png', prompt: 'q'.repeat(120) }))), 'img').getAttribute('alt')).toBe(`Image: ${'q'.repeat(120)}`);
    // What an image event leaves out (undefined) is left out too, as a stored null is.
    const fromEvent = find(read(renderThumbnail({ url: '/images/a.png', prompt: 'p', width: 8, height: 8 })), 'button.thumb');
    expect(['data-seed', 'data-steps', 'data-cfg', 'data-model', 'data-negative-prompt'].filter((name) => fromEvent.hasAttribute(name))).toEqual([]);
  });

  it('a Generate entry has a short label, its prompt and its thumbnail (a run of them shows the label once: web/easel.css)', () => {
    const entry = read(renderGeneratedEntry(makeImageRecord({ url: '/images/a.png', prompt: 'a lantern <b>' })));
    expect(find(entry, 'article.msg.generated .generated-label').text).toBe('Easel: Made with Generate');
    expect(find(entry, '.generated-label .visually-hidden').text).toBe('Easel: ');
    expect(find(entry, '.generated-prompt').text).toBe('a lantern <b>');
    expect(entry.querySelectorAll('.thumbs button.thumb')).toHaveLength(1);
  });

  it('only our own image URLs are shown: anything else renders nothing (or the placeholder)', () => {
    expect(isImageUrl('/images/a-b_c.png')).toBe(true);
    for (const url of ['/images/../x.png', 'https://x/images/a.png', '/images/a b.png', '/images/', '/imagesx/a.png', '/images/a/b.png']) {
      expect(isImageUrl(url)).toBe(false);
      expect(String(renderThumbnail(makeImageRecord({ url })))).toBe('');
      expect(String(renderGeneratedEntry(makeImageRecord({ url })))).toBe('');
      expect(find(read(renderImage(makeImageRecord({ url }))), '.placeholder').text).toBe('No image yet.');
    }
  });

  it('the image area\'s caption leaves out an unknown seed and model', () => {
    expect(find(read(renderImage(makeImageRecord({ url: '/images/a.png', seed: null, model: null, width: 64, height: 128 }))), '.image-caption').text).toBe('64 × 128 · Download');
    expect(find(read(renderImage({ url: '/images/a.png', prompt: 'p', width: 64, height: 128 })), '.image-caption').text).toBe('64 × 128 · Download');
  });
});
