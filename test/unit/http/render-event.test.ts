// The HTML renderer of turn events, without a browser: every event renders, and nothing a model or a
// user wrote can become markup.
import { describe, expect, it } from 'vitest';
import type { DoneEvent, TurnEvent } from '../../../server/core/index.ts';
import { renderEventHtml, renderTurnStart } from '../../../server/http/page/index.ts';
import { renderMessage } from '../../../server/http/page/markup.ts';

const HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)><hx-partial hx-target="#log">x</hx-partial>" hx-get="/x';
const view = { conversationId: 'c1', bubbleId: 'reply-1', userText: HOSTILE };

const EVENTS: TurnEvent[] = [
  { type: 'delta', text: HOSTILE },
  { type: 'status', message: HOSTILE },
  { type: 'retry', attempt: 2, level: 'reminder' },
  { type: 'metadata', prompt: HOSTILE, generate_image: true, steps: 20, cfg: 7, seed: -1, negative_prompt: HOSTILE, notices: [HOSTILE] },
  { type: 'reset', message: HOSTILE },
  { type: 'generation', id: 'g1', queued: true },
  { type: 'progress', id: 'g1', step: 3, steps: 12 },
  { type: 'image', id: 'g1', url: '/images/0123456789abcdef0123456789abcdef.png', seed: 5, width: 512, height: 768, prompt: HOSTILE },
  { type: 'error', code: 'x', message: HOSTILE },
  { type: 'done', attempts: 1, repairs: [], level: 'stopped', evalCount: 1, tokensPerSecond: 1, firstTokenMs: 1 },
];

describe('renderEventHtml', () => {
  it.each(EVENTS)('renders a $type event with every string escaped', (event) => {
    const markup = String(renderEventHtml(event, { ...view }));
    expect(markup.length).toBeGreaterThan(0);
    expect(markup).not.toContain('<script');
    expect(markup).not.toContain('<img src=x');
    // A raw quote would end the attribute it sits in and start one of the model's own.
    expect(markup).not.toContain('" hx-get="/x');
    // Partials come only from the renderer itself: the model's one is text.
    expect(markup).not.toContain('<hx-partial hx-target="#log">');
  });

  it('appends each token as text (no element) to the block in progress, keeping whitespace as it is', () => {
    expect(String(renderEventHtml({ type: 'delta', text: '  two\n lines <b>' }, { ...view }))).toBe(
      '<hx-partial hx-target="#reply-1-live" hx-swap="beforeend">  two\n lines &lt;b&gt;</hx-partial>',
    );
  });

  it('renders each finished Markdown block once, then the rest of the reply when it is final', () => {
    const stream = { ...view };
    const render = (event: TurnEvent) => String(renderEventHtml(event, stream));
    expect(render({ type: 'delta', text: 'A **bold** idea.\n\n' })).not.toContain('<strong>');
    expect(render({ type: 'delta', text: 'Next' })).toBe(
      '<hx-partial hx-target="#reply-1-live" hx-swap="outerHTML"><p>A <strong>bold</strong> idea.</p><div class="md-live" id="reply-1-live">Next</div></hx-partial>',
    );
    const end = render({ type: 'metadata', prompt: 'p', generate_image: false, steps: 20, cfg: 7, seed: -1, notices: [] });
    expect(end).toContain('<hx-partial hx-target="#reply-1-live" hx-swap="outerHTML"><p>Next</p></hx-partial>');
    // The text is final: the end of the turn renders nothing of it again.
    expect(render(EVENTS.at(-1)!)).not.toContain('reply-1-live');
  });

  it('shows a status in the text\'s place, and whatever comes next removes it first', () => {
    expect(String(renderEventHtml({ type: 'status', message: 'Loading mistral:7b…' }, view))).toBe(
      '<hx-partial hx-target="#reply-1-text" hx-swap="beforeend"><span class="status" id="reply-1-status">Loading mistral:7b…</span></hx-partial>',
    );
    const afterStatus = { ...view, statusShown: true };
    for (const event of [{ type: 'delta', text: 'Hi' }, { type: 'error', code: 'x', message: 'm' }, EVENTS.at(-1)!] as TurnEvent[]) {
      expect(String(renderEventHtml(event, afterStatus))).toMatch(/^<hx-partial hx-target="#reply-1-status" hx-swap="delete"><\/hx-partial>/);
    }
    expect(String(renderEventHtml({ type: 'delta', text: 'Hi' }, view))).not.toContain('-status');
  });

  it('keeps the text when only the metadata is asked for again: no fragment at all, and a status line is appended', () => {
    expect(String(renderEventHtml({ type: 'metadata_retry', attempt: 2 }, view))).toBe('');
    // The status of the metadata-only call goes after the kept text, never in its place.
    expect(String(renderEventHtml({ type: 'status', message: 'Waiting…' }, view))).not.toMatch(/hx-swap="(innerHTML|outerHTML|textContent)"/);
  });

  it('sends errors after an image started to the image area, not the reply, and removes that image\'s bar', () => {
    const markup = String(renderEventHtml({ type: 'error', code: 'cancelled', message: 'Cancelled.' }, { ...view, imageStarted: true, generationId: 'g1' }));
    expect(markup).toContain('<hx-partial hx-target="#image-error" hx-swap="innerHTML"><p class="image-error" role="alert">Cancelled.</p>');
    expect(markup).toContain('<hx-partial hx-target="#generation-g1" hx-swap="delete">');
    expect(markup).not.toContain('Retry');
  });

  it('starts an image with an indeterminate progressbar and a Cancel that stops only images', () => {
    const markup = String(renderEventHtml({ type: 'generation', id: 'g1' }, view));
    const bar = /<div class="progress" id="generation-g1-bar" role="progressbar"[^>]*>/.exec(markup)?.[0] ?? '';
    expect(bar).toContain('aria-label="Image progress"');
    expect(bar).not.toContain('aria-valuenow');
    expect(markup).toContain('<progress max="100" aria-hidden="true"></progress>');
    expect(markup).toContain('hx-post="/c/c1/images/cancel"');
    expect(markup).toContain('Making the image…');
  });

  it('reports a known fraction as aria-valuenow in percent, with the step as text', () => {
    const markup = String(renderEventHtml({ type: 'progress', id: 'g1', fraction: 0.254, step: 3, steps: 12 }, view));
    expect(markup).toContain('<hx-partial hx-target="#generation-g1-bar" hx-swap="outerHTML">');
    expect(markup).toContain('aria-valuenow="25" aria-valuetext="25%, step 3 of 12"');
    expect(markup).toContain('<progress max="100" value="25" aria-hidden="true">');
    expect(String(renderEventHtml({ type: 'progress', id: 'g1', step: 6, steps: 12 }, view))).toContain('aria-valuenow="50"');
  });

  it("shows the backend's time left beside the step, without announcing it", () => {
    const markup = String(renderEventHtml({ type: 'progress', id: 'g1', fraction: 0.26, step: 3, steps: 12, etaSeconds: 8 }, view));
    expect(markup).toContain('<span class="step">26% · step 3 of 12 · about 8 s left</span>');
    expect(markup).toContain('aria-valuetext="26%, step 3 of 12"');
  });

  it('keeps the bar indeterminate when the backend reports no fraction (sd-server)', () => {
    const markup = String(renderEventHtml({ type: 'progress', id: 'g1' }, view));
    expect(markup).toContain('role="progressbar"');
    expect(markup).not.toContain('aria-valuenow');
    expect(markup).not.toContain(' value=');
  });

  it('never puts a generation id that is not a plain token into a selector', () => {
    expect(String(renderEventHtml({ type: 'generation', id: '"] *' }, view))).toBe('');
    expect(String(renderEventHtml({ type: 'progress', id: 'a b', fraction: 0.5 }, view))).toBe('');
  });

  it('gives a thumbnail every stored setting, escaped, for the large view', () => {
    const record = {
      url: '/images/0123456789abcdef0123456789abcdef.png',
      prompt: HOSTILE,
      negativePrompt: HOSTILE,
      steps: 6,
      cfg: 5.5,
      seed: 9,
      width: 640,
      height: 448,
      model: HOSTILE,
    };
    const event: TurnEvent = { type: 'image', id: 'g1', url: record.url, seed: 9, width: 640, height: 448, prompt: HOSTILE };
    const markup = String(renderEventHtml(event, { ...view, findImage: (id) => (id === 'g1' ? record : undefined) }));
    expect(markup).toContain('hx-target="#reply-1-images"');
    expect(markup).toContain('data-steps="6" data-cfg="5.5"');
    expect(markup).toContain('data-negative-prompt="&lt;script&gt;');
    expect(markup).not.toContain('<script');
    expect(markup).not.toContain('" hx-get="/x');
  });

  it('puts an image from the Generate button in the chat as an entry of its own', () => {
    const markup = String(
      renderEventHtml(
        { type: 'image', id: 'g1', url: '/images/0123456789abcdef0123456789abcdef.png', seed: 1, width: 8, height: 8, prompt: 'p' },
        { conversationId: 'c1', imageStarted: true, generationId: 'g1' },
      ),
    );
    expect(markup).toContain('<hx-partial hx-target="#log" hx-swap="beforeend"><article class="msg generated">');
    expect(markup).toContain('<hx-partial hx-target="#generation-g1" hx-swap="delete">');
  });

  it('never links an image URL that is not one of ours', () => {
    const markup = String(renderEventHtml({ type: 'image', id: 'g', url: 'javascript:alert(1)', seed: 1, width: 1, height: 1, prompt: 'p' }, view));
    expect(markup).not.toContain('javascript:');
  });

  it('starts a turn with the user bubble and an empty reply bubble, both escaped', () => {
    const markup = String(renderTurnStart({ ...view, at: '2026-11-23T10:00:00.000Z' }));
    expect(markup).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(markup).toContain('<time class="msg-time" datetime="2026-11-23T10:00:00.000Z">');
    expect(markup).toContain('id="reply-1-text"');
    expect(markup).not.toContain('<script');
  });
});

describe('the library on the page', () => {
  it('renders a storage failure before the turn began with the text to put back, escaped', () => {
    const markup = String(
      renderEventHtml({ type: 'error', code: 'storage_full', message: 'full' }, { conversationId: 'c1', bubbleId: 'reply-1', userText: '<b>"mine"</b>' }),
    );
    expect(markup).toContain('<hx-partial hx-target="#composer-inbox" hx-swap="innerHTML"><div class="restore-text" data-text="&lt;b&gt;&quot;mine&quot;&lt;/b&gt;">');
    // Once the message is stored, it is not put back (it is kept in the conversation).
    const stored = String(
      renderEventHtml({ type: 'error', code: 'storage_full', message: 'full' }, { conversationId: 'c1', bubbleId: 'reply-1', userText: 'mine', started: true }),
    );
    expect(stored).not.toContain('composer-inbox');
  });

  it('offers Regenerate and Edit once a stored turn is done, and not for a message that was not stored', () => {
    const done: DoneEvent = { type: 'done', attempts: 1, repairs: [], level: 'clean', evalCount: 1, tokensPerSecond: 1, firstTokenMs: 1 };
    const stored = String(renderEventHtml(done, { conversationId: 'c1', bubbleId: 'reply-1', userText: 'x', started: true }));
    expect(stored).toContain('class="regenerate-button last-only"');
    expect(stored).toContain('<hx-partial hx-target="#reply-1-user .msg-actions" hx-swap="beforeend"><button type="button" class="edit-message last-only">Edit</button>');
    const unsaved = String(renderEventHtml(done, { conversationId: 'c1', bubbleId: 'reply-1', userText: 'x' }));
    expect(unsaved).not.toContain('regenerate-button');
    expect(unsaved).not.toContain('edit-message');
  });
});

describe('renderMessage', () => {
  it('shows backticked commands as code and escapes everything', () => {
    expect(String(renderMessage('Start it with `ollama serve` & retry <now>.'))).toBe(
      'Start it with <code>ollama serve</code> &amp; retry &lt;now&gt;.',
    );
    expect(String(renderMessage('Run `<script>alert(1)</script>`'))).toBe('Run <code>&lt;script&gt;alert(1)&lt;/script&gt;</code>');
  });

  it('leaves unpaired backticks as text', () => {
    expect(String(renderMessage('a ` lone tick'))).toBe('a ` lone tick');
  });
});
