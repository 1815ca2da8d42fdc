// The HTML renderer of turn events, without a browser: every event renders, and nothing a model or a
// user wrote can become markup.
import { describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../server/core/index.ts';
import { renderEventHtml, renderTurnStart } from '../../server/http/page/index.ts';

const HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)><hx-partial hx-target="#log">x</hx-partial>" hx-get="/x';
const view = { conversationId: 'c1', bubbleId: 'reply-1', userText: HOSTILE };

const EVENTS: TurnEvent[] = [
  { type: 'delta', text: HOSTILE },
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
    const markup = String(renderEventHtml(event, view));
    expect(markup.length).toBeGreaterThan(0);
    expect(markup).not.toContain('<script');
    expect(markup).not.toContain('<img src=x');
    // A raw quote would end the attribute it sits in and start one of the model's own.
    expect(markup).not.toContain('" hx-get="/x');
    // Partials come only from the renderer itself: the model's one is text.
    expect(markup).not.toContain('<hx-partial hx-target="#log">');
  });

  it('wraps each token in a span appended to the bubble, keeping whitespace as it is', () => {
    expect(String(renderEventHtml({ type: 'delta', text: '  two\n lines ' }, view))).toBe(
      '<hx-partial hx-target="#reply-1-text" hx-swap="beforeend"><span>  two\n lines </span></hx-partial>',
    );
  });

  it('sends errors after an image started to the image area, not the reply', () => {
    const markup = String(renderEventHtml({ type: 'error', code: 'cancelled', message: 'Cancelled.' }, { ...view, imageStarted: true }));
    expect(markup).toContain('hx-target="#image-status"');
    expect(markup).not.toContain('Retry');
  });

  it('never links an image URL that is not one of ours', () => {
    const markup = String(renderEventHtml({ type: 'image', id: 'g', url: 'javascript:alert(1)', seed: 1, width: 1, height: 1, prompt: 'p' }, view));
    expect(markup).not.toContain('javascript:');
  });

  it('starts a turn with the user bubble and an empty reply bubble, both escaped', () => {
    const markup = String(renderTurnStart(view));
    expect(markup).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(markup).toContain('id="reply-1-text"');
    expect(markup).not.toContain('<script');
  });
});
