// The HTML renderer of a turn's events, the page's twin of the API's renderEventJson: each event
// becomes one SSE message whose data is htmx 4 <hx-partial> fragments with their own targets.
// It only renders: the protocol (withholding `---` and the JSON, the ladder) lives in the core.
import type { TurnEvent } from '../../core/index.ts';
import {
  conversationPath,
  describeBubble,
  renderAssistantBubble,
  renderDivider,
  renderErrorBox,
  renderImage,
  renderNotice,
  renderThumbnail,
  renderUserBubble,
} from './bubbles.ts';
import { EMPTY, html, joinHtml, renderPartial, type Html } from './markup.ts';

export interface StreamView {
  conversationId: string;
  /** The assistant bubble this stream writes into; absent for a stream started by Generate. */
  bubbleId?: string;
  /** The user's message, sent again by Retry. */
  userText?: string;
  /** Set by the caller once a `generation` event passed: later errors concern the image, not the reply. */
  imageStarted?: boolean;
}

/** The first message of a reply stream: the user's bubble at once, and the empty bubble the reply fills. */
export function renderTurnStart(view: StreamView & { bubbleId: string; userText: string }): Html {
  return joinHtml([
    renderPartial('#log-empty', 'delete'),
    renderPartial('#log', 'beforeend', joinHtml([renderUserBubble(view.userText), renderAssistantBubble(view.bubbleId, { streaming: true })])),
  ]);
}

export function renderEventHtml(event: TurnEvent, view: StreamView): Html {
  const ids = view.bubbleId ? describeBubble(view.bubbleId) : undefined;
  switch (event.type) {
    case 'delta':
      // One span per token, appended: `white-space: pre-wrap` on the bubble keeps spaces and newlines.
      return ids ? renderPartial(`#${ids.text}`, 'beforeend', html`<span>${event.text}</span>`) : EMPTY;
    case 'retry':
      // The new attempt replaces the old text silently.
      return ids ? renderPartial(`#${ids.text}`, 'outerHTML', html`<div class="text" id="${ids.text}"></div>`) : EMPTY;
    case 'metadata':
      return joinHtml([
        renderPartial('#metadata-inbox', 'innerHTML', renderMetadataCarrier(event)),
        ids && event.notices.length > 0 ? renderPartial(`#${ids.notes}`, 'beforeend', joinHtml(event.notices.map(renderNotice))) : EMPTY,
      ]);
    case 'reset':
      return ids
        ? joinHtml([
            renderPartial(`#${ids.text}`, 'outerHTML', html`<div class="text" id="${ids.text}">${event.message}</div>`),
            renderPartial(`#${ids.bubble}`, 'afterend', renderDivider()),
          ])
        : EMPTY;
    case 'generation':
      return renderPartial(
        '#image-status',
        'innerHTML',
        html`<p>${event.queued ? 'Waiting for the image backend: another image is being made first.' : 'Making the image…'}</p>
<div class="progress-row"><progress id="image-progress" max="1" aria-label="Image progress"></progress><button type="button" class="cancel" hx-post="${conversationPath(view.conversationId, '/stop')}" hx-swap="none">Cancel</button></div>`,
      );
    case 'progress': {
      const fraction = event.fraction ?? (event.step !== undefined && event.steps ? event.step / event.steps : undefined);
      const value = fraction === undefined ? EMPTY : html` value="${Math.min(1, Math.max(0, fraction)).toFixed(3)}"`;
      const step = event.step !== undefined && event.steps !== undefined ? html`<span class="step">Step ${event.step} of ${event.steps}</span>` : EMPTY;
      return renderPartial('#image-progress', 'outerHTML', html`<progress id="image-progress" max="1"${value} aria-label="Image progress"></progress>${step}`);
    }
    case 'image':
      return joinHtml([
        renderPartial('#image-frame', 'innerHTML', renderImage(event)),
        renderPartial('#image-status', 'innerHTML'),
        ids ? renderPartial(`#${ids.images}`, 'beforeend', renderThumbnail(event)) : EMPTY,
      ]);
    case 'error':
      if (!ids || view.imageStarted) {
        return renderPartial('#image-status', 'innerHTML', html`<p class="image-error" role="alert">${event.message}</p>`);
      }
      return joinHtml([
        renderPartial(`#${ids.cursor}`, 'delete'),
        renderPartial(`#${ids.notes}`, 'beforeend', renderErrorBox(view.conversationId, event.message, view.userText)),
      ]);
    case 'done':
      if (!ids) return EMPTY;
      return joinHtml([
        renderPartial(`#${ids.cursor}`, 'delete'),
        event.level === 'stopped' ? renderPartial(`#${ids.notes}`, 'beforeend', renderNotice('Stopped.')) : EMPTY,
      ]);
  }
}

/** Hands the model's suggestion to web/easel.js, which decides whether it may fill the fields. */
function renderMetadataCarrier(event: Extract<TurnEvent, { type: 'metadata' }>): Html {
  const negative = event.negative_prompt === undefined ? EMPTY : html` data-negative-prompt="${event.negative_prompt}"`;
  return html`<div class="metadata" data-prompt="${event.prompt}" data-generate-image="${String(event.generate_image)}" data-steps="${event.steps}" data-cfg="${event.cfg}" data-seed="${event.seed}"${negative}></div>`;
}
