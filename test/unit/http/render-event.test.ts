// The HTML renderer of turn events, without a browser: every event renders, and nothing a model or a
// user wrote can become markup.
import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS } from '../../../server/core/settings.ts';
import { describeFamily } from '../../../server/core/pane.ts';
import type { DoneEvent, TurnEvent } from '../../../server/core/index.ts';
import { renderEventHtml, renderTurnStart } from '../../../server/http/page/index.ts';
import { describePlace, isBubbleId, type StreamView } from '../../../server/http/page/render-event.ts';
import { targets } from '../../helpers/html.ts';
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
  { type: 'error', code: 'internal_error', message: HOSTILE },
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

  it('a reply stopped mid-way ends without its unfinished marker, as a reload shows it; its headings rank below the page\'s', () => {
    for (const end of [{ type: 'done', attempts: 1, repairs: [], level: 'stopped', evalCount: 1, tokensPerSecond: 1, firstTokenMs: 1 }, { type: 'error', code: 'ollama_unreachable', message: 'Gone.' }] as TurnEvent[]) {
      const stream = { ...view, started: true };
      const render = (event: TurnEvent) => String(renderEventHtml(event, stream));
      expect(render({ type: 'delta', text: '# Ideas\n\nNice idea! I imagine **s' })).toContain('<h3>Ideas</h3>');
      // While it streams, the block in progress is its source; its end renders it, the marker gone.
      expect(render({ type: 'delta', text: 'lo' })).toBe('<hx-partial hx-target="#reply-1-live" hx-swap="beforeend">lo</hx-partial>');
      expect(render(end)).toContain('<hx-partial hx-target="#reply-1-live" hx-swap="outerHTML"><p>Nice idea! I imagine slo</p></hx-partial>');
    }
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
    const markup = String(renderEventHtml({ type: 'error', code: 'image_timeout', message: 'Too slow.' }, { ...view, imageStarted: true, generationId: 'g1' }));
    expect(markup).toContain('<hx-partial hx-target="#image-error" hx-swap="innerHTML"><p class="image-error" role="alert">Too slow.</p>');
    expect(markup).toContain('<hx-partial hx-target="#generation-g1" hx-swap="delete">');
    expect(markup).not.toContain('Retry');
  });

  it('starts an image with an indeterminate progressbar and a Cancel that stops only this image', () => {
    const markup = String(renderEventHtml({ type: 'generation', id: 'g1' }, view));
    const bar = /<div class="progress" id="generation-g1-bar" role="progressbar"[^>]*>/.exec(markup)?.[0] ?? '';
    expect(bar).toContain('aria-label="Image progress"');
    expect(bar).not.toContain('aria-valuenow');
    expect(markup).toContain('<progress max="100" aria-hidden="true"></progress>');
    expect(markup).toContain('hx-post="/c/c1/images/g1/cancel"');
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

  it('gives a thumbnail every setting the image event carries, escaped, for the large view', () => {
    const event: TurnEvent = {
      type: 'image',
      id: 'g1',
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
    const markup = String(renderEventHtml(event, { ...view }));
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

  it('gives Edit back to the message a Regenerate asked again (a stream that drew no message), as a reload does', () => {
    const done: DoneEvent = { type: 'done', attempts: 1, repairs: [], level: 'clean', evalCount: 1, tokensPerSecond: 1, firstTokenMs: 1 };
    const regenerated = String(renderEventHtml(done, { conversationId: 'c1', bubbleId: 'reply-2', started: true }));
    // Its bubble was drawn by a reload or by an earlier stream: the last message not replaced, whatever its id.
    expect(regenerated).toContain(
      '<hx-partial hx-target="#log &gt; .msg.user:not(.replaced):not(:has(~ .msg.user:not(.replaced))) .msg-actions" hx-swap="beforeend"><button type="button" class="edit-message last-only">Edit</button>',
    );
    // A failed or stopped Regenerate leaves the message editable too; one that never started offers nothing.
    const failed = String(renderEventHtml({ ...done, level: 'error' }, { conversationId: 'c1', bubbleId: 'reply-2', started: true }));
    expect(failed).toContain('class="edit-message last-only"');
    expect(String(renderEventHtml(done, { conversationId: 'c1', bubbleId: 'reply-2' }))).not.toContain('edit-message');
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

describe('each event of a turn, as the page receives it', () => {
  // A view of its own per call: the module's `view` carries the Markdown state earlier tests left in it.
  const fresh = (): StreamView => ({ conversationId: 'c1', bubbleId: 'reply-1', userText: HOSTILE });
  const done = (level: DoneEvent['level']): DoneEvent => ({ type: 'done', attempts: 1, repairs: [], level, evalCount: 1, tokensPerSecond: 1, firstTokenMs: 1 });

  it('a retry empties the reply for the new attempt, and its Markdown starts again', () => {
    const stream = { ...fresh() };
    renderEventHtml({ type: 'delta', text: 'Old **text**.\n\nMore' }, stream);
    expect(String(renderEventHtml({ type: 'retry', attempt: 2, level: 'reminder' }, stream))).toBe(
      '<hx-partial hx-target="#reply-1-text" hx-swap="outerHTML"><div class="text md" id="reply-1-text"><div class="md-live" id="reply-1-live"></div></div></hx-partial>',
    );
    expect(String(renderEventHtml({ type: 'delta', text: 'New' }, stream))).toBe('<hx-partial hx-target="#reply-1-live" hx-swap="beforeend">New</hx-partial>');
    expect(String(renderEventHtml({ type: 'metadata', prompt: 'p', generate_image: false, steps: 20, cfg: 7, seed: -1, notices: ['Note <1>.', 'Two.'] }, stream))).toBe(
      '<hx-partial hx-target="#reply-1-live" hx-swap="outerHTML"><p>New</p></hx-partial><hx-partial hx-target="#reply-1-notes" hx-swap="beforeend"><p class="notice">Note &lt;1&gt;.</p><p class="notice">Two.</p></hx-partial>',
    );
  });

  it('a reply with no words left ends by removing its empty block; the end is rendered once', () => {
    const stream = { ...fresh() };
    const metadata: TurnEvent = { type: 'metadata', prompt: 'p', generate_image: false, steps: 20, cfg: 7, seed: -1, notices: [] };
    expect(String(renderEventHtml(metadata, stream))).toBe('<hx-partial hx-target="#reply-1-live" hx-swap="delete"></hx-partial>');
    expect(targets(renderEventHtml(done('clean'), stream))).not.toContain('#reply-1-live delete');
  });

  it('a reset replaces the text with its message, offers the message again, and draws the divider', () => {
    const reset: TurnEvent = { type: 'reset', message: 'Starting **fresh**.' };
    const started = String(renderEventHtml(reset, { ...fresh(), userText: 'my "text"', started: true }));
    expect(targets(started)).toEqual(['#reply-1-text outerHTML', '#reply-1-notes beforeend', '#reply-1 afterend']);
    expect(started).toContain('<strong>fresh</strong>');
    expect(started).toContain('data-text="my &quot;text&quot;"');
    expect(started).toContain('<div class="divider" role="separator" aria-label="Fresh start">');
    // Regenerate has no text of its own: the last stored message is sent again.
    expect(String(renderEventHtml(reset, { conversationId: 'c1', bubbleId: 'reply-1', started: true, findLastMessage: () => 'the last' }))).toContain('data-text="the last"');
    // A message that was not stored has nothing to send again.
    expect(targets(renderEventHtml(reset, { ...fresh(), started: false }))).toEqual(['#reply-1-text outerHTML', '#reply-1 afterend']);
    // The text is final: the turn's end does not render it again.
    const stream = { ...fresh(), started: true };
    renderEventHtml(reset, stream);
    expect(targets(renderEventHtml(done('reset'), stream))).toEqual(['#reply-1-cursor delete', '#reply-1-actions beforeend', '#reply-1-user .msg-actions beforeend']);
  });

  it('the turn\'s end: Copy always, Regenerate only on a stored reply that did not fail or reset, "Stopped." for a Stop', () => {
    const end = (level: DoneEvent['level'], started: boolean) => String(renderEventHtml(done(level), { conversationId: 'c1', bubbleId: 'reply-1', started, replyEnded: true }));
    expect(end('clean', true)).toBe(
      '<hx-partial hx-target="#reply-1-cursor" hx-swap="delete"></hx-partial><hx-partial hx-target="#reply-1-actions" hx-swap="beforeend"><button type="button" class="copy-message" aria-label="Copy this reply">Copy</button><button type="button" class="regenerate-button last-only">Regenerate</button></hx-partial>' +
        // A stream with no message of its own (Regenerate): Edit goes back on the last message.
        '<hx-partial hx-target="#log &gt; .msg.user:not(.replaced):not(:has(~ .msg.user:not(.replaced))) .msg-actions" hx-swap="beforeend"><button type="button" class="edit-message last-only">Edit</button></hx-partial>',
    );
    for (const level of ['error', 'reset'] as const) expect(end(level, true)).not.toContain('regenerate-button');
    expect(end('stopped', true)).toContain('<hx-partial hx-target="#reply-1-notes" hx-swap="beforeend"><p class="notice">Stopped.</p></hx-partial>');
    expect(end('clean', true)).not.toContain('Stopped.');
    // The image's bar ends with the reply's stream.
    expect(targets(renderEventHtml(done('clean'), { ...fresh(), replyEnded: true, generationId: 'g1' }))).toContain('#generation-g1 delete');
  });

  it('a stream without a bubble (Generate) ends its image\'s bar, or renders nothing', () => {
    expect(String(renderEventHtml(done('clean'), { conversationId: 'c1', generationId: 'g7' }))).toBe('<hx-partial hx-target="#generation-g7" hx-swap="delete"></hx-partial>');
    expect(String(renderEventHtml(done('clean'), { conversationId: 'c1' }))).toBe('');
    for (const event of [{ type: 'delta', text: 'x' }, { type: 'status', message: 'x' }, { type: 'retry', attempt: 2, level: 'reminder' }, { type: 'reset', message: 'x' }, { type: 'image_not_made', reason: 'auto_off', message: 'x' }] as TurnEvent[]) {
      expect(String(renderEventHtml(event, { conversationId: 'c1', statusShown: true }))).toBe('');
    }
  });

  it('an error of the reply ends it with the error and Retry when the message is stored', () => {
    const markup = String(renderEventHtml({ type: 'error', code: 'ollama_unreachable', message: 'Run `ollama serve`.' }, { ...fresh(), started: true }));
    expect(targets(markup)).toEqual(['#reply-1-live delete', '#reply-1-cursor delete', '#reply-1-notes beforeend']);
    expect(markup).toContain('<p class="error-text">Run <code>ollama serve</code>.</p><button type="button" class="retry-button last-only">Retry</button>');
    expect(String(renderEventHtml({ type: 'error', code: 'internal_error', message: 'm' }, { ...fresh(), started: false }))).not.toContain('retry-button');
  });

  it('a reply cut by its length limit is a notice, not an error', () => {
    expect(String(renderEventHtml({ type: 'error', code: 'reply_truncated', message: 'Cut <here>.' }, { ...fresh() }))).toBe(
      '<hx-partial hx-target="#reply-1-notes" hx-swap="beforeend"><p class="notice">Cut &lt;here&gt;.</p></hx-partial>',
    );
  });

  it('a cancelled image is a quiet note; another image error an alert; neither names a bar it does not know', () => {
    const cancelled = String(renderEventHtml({ type: 'error', code: 'image_cancelled', message: 'Cancelled.' }, { conversationId: 'c1' }));
    expect(cancelled).toBe('<hx-partial hx-target="#image-error" hx-swap="innerHTML"><p class="image-note" role="status">Cancelled.</p></hx-partial>');
    expect(String(renderEventHtml({ type: 'error', code: 'image_failed', message: 'Run `x`.' }, { conversationId: 'c1' }))).toBe(
      '<hx-partial hx-target="#image-error" hx-swap="innerHTML"><p class="image-error" role="alert">Run <code>x</code>.</p></hx-partial>',
    );
  });

  it('the pane event updates the prompt pane; "image not made" says why with Generate', () => {
    const pane: TurnEvent = {
      type: 'pane',
      paneRevision: 2,
      prompt: 'p',
      promptVersion: 1,
      suggestion: null,
      settings: { ...DEFAULT_SETTINGS, autoGenerate: false },
      pinned: [],
      settingSuggestions: {},
      canUndo: false,
      canRedo: false,
      family: describeFamily(DEFAULT_SETTINGS, null),
    };
    expect(targets(renderEventHtml(pane, fresh()))).toContain('#pane-inbox innerHTML');
    expect(String(renderEventHtml(pane, fresh()))).not.toContain('data-force');
    const note = String(renderEventHtml({ type: 'image_not_made', reason: 'auto_off', message: 'Turn on `auto`.' }, fresh()));
    expect(note).toBe(
      '<hx-partial hx-target="#reply-1-notes" hx-swap="beforeend"><div class="image-note" data-reason="auto_off"><p class="image-note-text">Turn on <code>auto</code>.</p><button type="submit" form="generate-form" class="note-generate last-only">Generate</button></div></hx-partial>',
    );
  });

  it('the first event of a new conversation shows its head; of a stored one, nothing', () => {
    const head = { id: 'c1', title: 'Fox', isNew: false, imageCount: 0 };
    expect(targets(renderEventHtml({ type: 'started', turnId: 1 } as TurnEvent, { ...fresh(), describeCreated: () => head }))).toEqual([
      '#start-new delete',
      '#chat-head outerHTML',
      '#current-conversation outerHTML',
    ]);
    expect(String(renderEventHtml({ type: 'started', turnId: 1 } as TurnEvent, { ...fresh(), describeCreated: () => undefined }))).toBe('');
    expect(String(renderEventHtml({ type: 'started', turnId: 1 } as TurnEvent, fresh()))).toBe('');
  });

  it('a turn starts by clearing the empty log and the last turn\'s controls, then adds both bubbles', () => {
    const start = String(renderTurnStart({ conversationId: 'c1', bubbleId: 'reply-1', userText: 'hi', at: '2026-11-23T10:00:00.000Z' }));
    expect(targets(start)).toEqual(['#log-empty delete', '#log .last-only delete', '#log beforeend']);
    expect(start).toContain('<article class="msg user" id="reply-1-user">');
    expect(start).toMatch(/id="reply-1-user">[^]*<time class="msg-time" datetime="2026-11-23T10:00:00.000Z">[^]*<article class="msg assistant"/);
    // Regenerate asks the same message: no user bubble.
    expect(String(renderTurnStart({ conversationId: 'c1', bubbleId: 'reply-1', at: '2026-11-23T10:00:00.000Z' }))).not.toContain('msg user');
  });

  it('a second status replaces nothing: only what follows a status removes it', () => {
    expect(String(renderEventHtml({ type: 'status', message: 'Still loading…' }, { ...fresh(), statusShown: true }))).toBe(
      '<hx-partial hx-target="#reply-1-text" hx-swap="beforeend"><span class="status" id="reply-1-status">Still loading…</span></hx-partial>',
    );
  });

  it('an empty piece of text renders nothing; an error before the turn was stored puts back only text there is', () => {
    expect(String(renderEventHtml({ type: 'delta', text: '' }, fresh()))).toBe('');
    const regenerate = String(renderEventHtml({ type: 'error', code: 'storage_full', message: 'full' }, { conversationId: 'c1', bubbleId: 'reply-1' }));
    expect(regenerate).not.toContain('composer-inbox');
  });

  it('an image starts its block, clears an old error and is announced; queued, it says it waits', () => {
    expect(String(renderEventHtml({ type: 'generation', id: 'g1', queued: false }, fresh()))).toContain('<p class="image-state" id="generation-g1-state">Making the image…</p>');
    const queued = String(renderEventHtml({ type: 'generation', id: 'g1', queued: true }, fresh()));
    expect(targets(queued)).toEqual(['#image-error innerHTML', '#image-status beforeend', '#image-announce textContent']);
    expect(queued).toContain('<p class="image-state" id="generation-g1-state">Waiting for the image backend: another image is being made first.</p>');
    expect(queued).toMatch(/textContent">Waiting for the image backend: another image is being made first\.<\/hx-partial>$/);
    expect(String(renderEventHtml({ type: 'generation', id: 'g1' }, fresh()))).toMatch(/textContent">Making the image…<\/hx-partial>$/);
    // With its place in line, and its own Cancel.
    const second = String(renderEventHtml({ type: 'generation', id: 'g1', queued: true, place: 2 }, fresh()));
    expect(second).toContain('<p class="image-state" id="generation-g1-state">Waiting — 2nd in line</p>');
    expect(second).toContain('hx-post="/c/c1/images/g1/cancel"');
    expect(String(renderEventHtml({ type: 'progress', id: 'g1', place: 1 }, fresh()))).toBe('<hx-partial hx-target="#generation-g1-state" hx-swap="innerMorph">Waiting — 1st in line</hx-partial>');
    expect([1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111].map(describePlace)).toEqual(['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '22nd', '101st', '111th']);
    // After the reply's end, the block follows the image on a stream of its own.
    expect(String(renderEventHtml({ type: 'generation', id: 'g1' }, { ...fresh(), bubbleId: 'reply-0123456789ab', replied: true }))).toContain(
      '<div class="image-follower" hidden hx-get="/c/c1/images/g1/events?bubble=reply-0123456789ab" hx-trigger="load" hx-swap="none"></div>',
    );
    // Only an id the page makes goes into the follower's address.
    expect(String(renderEventHtml({ type: 'generation', id: 'g1' }, { ...fresh(), replied: true }))).not.toContain('image-follower');
    expect(String(renderEventHtml({ type: 'generation', id: 'g1' }, fresh()))).not.toContain('image-follower');
  });

  it('a finished image fills the image area, ends its bar, is announced and lands in its reply', () => {
    const image: TurnEvent = { type: 'image', id: 'g1', url: '/images/a.png', seed: 3, width: 8, height: 8, prompt: 'p' };
    expect(targets(renderEventHtml(image, fresh()))).toEqual(['#image-frame innerHTML', '#generation-g1 delete', '#image-announce textContent', '#reply-1-images beforeend']);
    expect(String(renderEventHtml(image, fresh()))).toContain('<hx-partial hx-target="#image-announce" hx-swap="textContent">The image is ready.</hx-partial>');
    expect(targets(renderEventHtml(image, { conversationId: 'c1' })).slice(3)).toEqual(['#log-empty delete', '#log beforeend']);
  });

  it('progress: a queued line becomes "Making the image…", the fraction is clamped, long waits in minutes', () => {
    const progress = (event: Omit<Extract<TurnEvent, { type: 'progress' }>, 'type' | 'id'>) => String(renderEventHtml({ type: 'progress', id: 'g1', ...event }, fresh()));
    expect(progress({})).toContain('<hx-partial hx-target="#generation-g1-state" hx-swap="innerMorph">Making the image…</hx-partial>');
    expect(progress({ fraction: 1.7 })).toContain('aria-valuenow="100" aria-valuetext="100%"');
    expect(progress({ fraction: -0.2 })).toContain('aria-valuenow="0"');
    expect(progress({ fraction: Number.NaN })).not.toContain('aria-valuenow');
    expect(progress({ fraction: 0.5, etaSeconds: 89.4 })).toContain('<span class="step">50% · about 89 s left</span>');
    expect(progress({ fraction: 0.5, etaSeconds: 150 })).toContain('about 3 min left');
    expect(progress({ fraction: 0.5, etaSeconds: 90 })).toContain('about 2 min left');
    // The label starts with a capital whatever comes first.
    expect(progress({ etaSeconds: 8 })).toContain('<span class="step">About 8 s left</span>');
    expect(progress({ fraction: 0.5, etaSeconds: 0.2 })).toContain('about 1 s left');
    expect(progress({ fraction: 0.5, etaSeconds: Number.POSITIVE_INFINITY })).toContain('<span class="step">50%</span>');
    expect(progress({ step: 2, steps: 8 })).toContain('<span class="step">25% · step 2 of 8</span>');
    // Steps without a total are no fraction: the bar stays indeterminate and says it works.
    expect(progress({ step: 2, steps: 0 })).toContain('aria-valuetext="Working"');
    expect(progress({ step: 2, steps: 0 })).not.toContain('class="step"');
  });
});

describe('isBubbleId', () => {
  it('accepts only the ids the page makes', () => {
    expect(['turn-1', 'turn-123456789012345', 'reply-0123456789ab'].every(isBubbleId)).toBe(true);
    expect(['turn-', 'turn-1234567890123456', 'reply-0123456789aB', 'reply-0123456789a', 'xturn-1', 'turn-1 ', 7].some(isBubbleId)).toBe(false);
  });
});
