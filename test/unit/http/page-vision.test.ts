// The vision model on the page's markup: Check on a generated picture's thumbnail (not a reference image's), the
// critique under the picture's row with Fix and regenerate (a submit button of #generate-form with fix=<imageId>),
// drawn the same by the asker's stream, every live view and a reload, and replacing itself; the suggestion box says
// who suggests; Settings → Models offers only the models that can see.
import { describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../../server/core/index.ts';
import { renderCheckButton, renderCritique, renderThumbnail } from '../../../server/http/page/bubbles.ts';
import { createLiveView, createOwnWork } from '../../../server/http/page/live-view.ts';
import { renderModelsUpdate } from '../../../server/http/page/models-view.ts';
import { renderSuggestion } from '../../../server/http/page/pane.ts';
import { renderEventHtml } from '../../../server/http/page/render-event.ts';
import { renderTranscript } from '../../../server/http/page/views.ts';
import type { EaselService } from '../../../server/core/index.ts';
import { find, read, targets, texts } from '../../helpers/html.ts';
import { makeImageRecord } from '../../helpers/records.ts';

const ID = 'a'.repeat(32);
const HOSTILE = '<b>bold</b>" hx-get="/x';
const CRITIQUE: Extract<TurnEvent, { type: 'critique' }> = {
  type: 'critique',
  imageId: ID,
  checkId: 3,
  model: 'gemma3:4b',
  matches: ['a fox', HOSTILE],
  misses: [{ element: 'snow', evidence: `the ground is green ${HOSTILE}` }],
  revisedPrompt: `a red fox in deep snow ${HOSTILE}`,
};
const ROW = `#log .thumbs:has([data-image-id="${ID}"])`;

describe('Check and its critique on the page', () => {
  it('a generated picture offers Check, posting to its conversation; a reference image, or one without a conversation, does not', () => {
    const root = read(renderThumbnail(makeImageRecord({ id: ID, conversationId: 'c 1', url: `/images/${ID}.png` })));
    expect(find(root, 'button.check-image').attributes).toMatchObject({ type: 'button', 'hx-post': `/c/c%201/images/${ID}/check`, 'hx-swap': 'none' });
    expect(texts(root, 'button')).toContain('Check');
    const reference = makeImageRecord({ id: ID, prompt: '', seed: null, steps: null, model: null });
    expect(String(renderCheckButton(reference))).toBe('');
    expect(String(renderCheckButton({ id: ID, url: '/images/x.png', prompt: 'p', width: 8, height: 8 }))).toBe('');
  });

  it('the critique: who checked, what it shows, what is missing and what it shows instead, and Fix and regenerate; every word escaped', () => {
    const markup = String(renderCritique(CRITIQUE));
    expect(markup).not.toContain('<b>bold');
    expect(markup).not.toContain('" hx-get="/x');
    const block = find(read(markup), `section#critique-${ID}`);
    expect(find(block, 'h3').text).toBe('Checked by gemma3:4b');
    expect(texts(block, '.critique-matches li')).toEqual(['a fox', HOSTILE]);
    expect(texts(block, '.critique-misses li')).toEqual([`snow — the ground is green ${HOSTILE}`]);
    expect(find(block, 'button.fix-image').attributes).toMatchObject({ type: 'submit', form: 'generate-form', name: 'fix', value: ID });
    // Nothing missed: nothing to fix.
    const clean = read(renderCritique({ ...CRITIQUE, misses: [] }));
    expect(clean.querySelector('button.fix-image')).toBeNull();
    expect(texts(clean, '.critique-none')).toEqual(['Nothing: the picture shows what was asked.']);
  });

  it('the critique event replaces the "Checking…" line and an earlier critique under the picture\'s row', () => {
    expect(targets(renderEventHtml(CRITIQUE, { conversationId: 'c1', checking: ID }))).toEqual([`#critique-status-${ID} delete`, `#critique-${ID} delete`, `${ROW} afterend`]);
    // An id that could reach the selector is not drawn.
    expect(String(renderEventHtml({ ...CRITIQUE, imageId: 'x"] , body' }, { conversationId: 'c1' }))).toBe('');
  });

  it('a check that failed is said in place of its line: a cancel quietly, anything else as an alert', () => {
    const failed = renderEventHtml({ type: 'error', code: 'vision_failed', message: `The vision model could not answer: ${HOSTILE}` }, { conversationId: 'c1', checking: ID });
    expect(targets(failed)).toEqual([`#critique-status-${ID} delete`, `${ROW} afterend`]);
    expect(find(read(failed), `#critique-status-${ID}`).attributes).toMatchObject({ class: 'critique-status critique-failed', role: 'alert' });
    expect(String(failed)).not.toContain('<b>bold');
    const cancelled = find(read(renderEventHtml({ type: 'error', code: 'vision_cancelled', message: 'The check was cancelled.' }, { conversationId: 'c1', checking: ID })), `#critique-status-${ID}`);
    expect(cancelled.attributes).toMatchObject({ class: 'critique-status', role: 'status' });
  });

  it('every live view draws check_started, critique and check_failed under the picture, before any image rule', () => {
    const service = { getConversation: () => undefined } as unknown as EaselService;
    const live = createLiveView({ service, conversationId: 'c1', own: createOwnWork() });
    const started = live.render({ type: 'check_started', imageId: ID, model: 'llava:7b' });
    expect(find(read(started), `#critique-status-${ID} .critique-status-text`).text).toBe('Checking the picture with llava:7b…');
    expect(targets(live.render(CRITIQUE))).toEqual([`#critique-status-${ID} delete`, `#critique-${ID} delete`, `${ROW} afterend`]);
    expect(find(read(live.render({ type: 'check_failed', imageId: ID, code: 'vision_failed', message: 'Ollama is not reachable.' })), `#critique-status-${ID}`).text).toBe('Ollama is not reachable.');
  });

  it('a reload draws each picture\'s latest check right under its row', () => {
    const image = makeImageRecord({ id: ID, url: `/images/${ID}.png` });
    const check = (id: number, model: string) => ({ ...CRITIQUE, id, conversationId: 'c', model, createdAt: '2026-11-26T10:00:00.000Z' });
    const root = read(renderTranscript('c', [], [image], false, [], [check(1, 'llava:7b'), check(2, 'gemma3:4b')]));
    expect(texts(root, '.critique h3')).toEqual(['Checked by gemma3:4b']);
    expect(find(root, '.thumbs').nextElementSibling?.id).toBe(`critique-${ID}`);
  });

  it('the suggestion box says who suggests', () => {
    const vision = read(renderSuggestion('c1', { suggestion: { prompt: 'a fox', turnId: null, imageId: ID } }));
    expect(find(vision, '#suggestion-label').text).toBe('The vision model checked the picture and suggests:');
    expect(find(vision, '#suggestion').getAttribute('data-from')).toBe('vision');
    const assistant = read(renderSuggestion('c1', { suggestion: { prompt: 'a fox', turnId: 4 } }));
    expect(find(assistant, '#suggestion-label').text).toBe('You changed the prompt while the assistant answered, so yours stays. The assistant suggests:');
  });
});

describe('Settings → Models: the vision model', () => {
  const model = (name: string, capabilities: string[]) => ({ name, sizeBytes: 1e9, parameterSize: '4B', quantization: 'Q4_0', family: 'gemma3', capabilities, contextLength: 8192 });
  const view = (visionDefault: string | null, installed: ReturnType<typeof model>[]) => ({
    chat: { default: 'mistral:7b', visionDefault, installed, problem: null },
    image: { backend: 'none' as const, checkpoints: [], current: null, samplers: [], schedulers: [], problem: null },
  });
  const choices = { chatModel: null, checkpoint: null, sampler: null, scheduler: null, family: null, visionModel: null };

  it('lists the installed models, those that cannot see disabled; "Default" names --vision-model, else "None"', () => {
    const root = read(renderModelsUpdate(choices, view('gemma3:4b', [model('mistral:7b', ['completion']), model('gemma3:4b', ['completion', 'vision'])])));
    expect(root.querySelectorAll('#setting-visionModel option').map((option) => `${option.text}${option.hasAttribute('disabled') ? ' (disabled)' : ''}`)).toEqual([
      'Default (gemma3:4b)',
      'mistral:7b · 1.0 GB · 4B (disabled)',
      'gemma3:4b · 1.0 GB · 4B · vision',
    ]);
    const none = read(renderModelsUpdate({ ...choices, visionModel: 'gemma3:4b' }, view(null, [model('gemma3:4b', ['completion', 'vision'])])));
    expect(find(none, '#setting-visionModel option[value=""]').text).toBe('None');
    expect(find(none, '#setting-visionModel option[selected]').getAttribute('value')).toBe('gemma3:4b');
  });

  it('says what to pull when no installed model can see', () => {
    const note = find(read(renderModelsUpdate(choices, view(null, [model('mistral:7b', ['completion'])]))), '#models-vision-note');
    expect(note.text).toBe('None of your models can see pictures: pull one (ollama pull gemma3, or Pull below).');
    expect(find(note, 'code').text).toBe('ollama pull gemma3');
  });
});
