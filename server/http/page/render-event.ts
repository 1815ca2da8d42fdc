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
  renderGeneratedEntry,
  renderImage,
  renderNotice,
  renderRegenerateButton,
  renderThumbnail,
  renderUserBubble,
  type ImageDetails,
} from './bubbles.ts';
import { renderCreated, type ChatHead } from './library.ts';
import { EMPTY, html, joinHtml, renderMessage, renderPartial, type Html } from './markup.ts';

export interface StreamView {
  conversationId: string;
  /** The assistant bubble this stream writes into; absent for a stream started by Generate. */
  bubbleId?: string;
  /** The user's message, sent again by Retry. */
  userText?: string;
  /** Set by the caller once a `generation` event passed: later errors concern the image, not the reply. */
  imageStarted?: boolean;
  /** The id of that generation, set by the caller with `imageStarted`: an `error` event names none. */
  generationId?: string;
  /** The stored record of a finished image, so its thumbnail carries every setting for the large view. */
  findImage?: (imageId: string) => ImageDetails | undefined;
  /** Set by the caller while the last event rendered was a `status`: the next event removes that line. */
  statusShown?: boolean;
  /** Set by the caller once the `started` event passed: the message is stored (Edit and Regenerate may follow). */
  started?: boolean;
  /** This message creates the conversation (the empty page): its head, once it exists. */
  describeCreated?: () => ChatHead | undefined;
}

/** The user's bubble of a streamed turn, next to its reply's. */
function userBubbleId(bubbleId: string): string {
  return `${bubbleId}-user`;
}

/**
 * The first message of a reply stream: the user's bubble at once (none for Regenerate, which asks the same
 * message again), and the empty bubble the reply fills. Edit and Regenerate move to the new turn.
 */
export function renderTurnStart(view: StreamView & { bubbleId: string; at: string }): Html {
  const bubbles = [
    view.userText === undefined ? EMPTY : renderUserBubble(view.userText, { id: userBubbleId(view.bubbleId), createdAt: view.at }),
    renderAssistantBubble(view.bubbleId, { streaming: true, createdAt: view.at }),
  ];
  return joinHtml([renderPartial('#log-empty', 'delete'), renderPartial('#log .last-only', 'delete'), renderPartial('#log', 'beforeend', joinHtml(bubbles))]);
}

export function renderEventHtml(event: TurnEvent, view: StreamView): Html {
  const fragment = renderEventFragment(event, view);
  // Whatever comes after a status line (the first words, an error, Stop) takes its place.
  if (!view.statusShown || event.type === 'status' || !view.bubbleId) return fragment;
  return joinHtml([renderPartial(`#${describeBubble(view.bubbleId).status}`, 'delete'), fragment]);
}

function renderEventFragment(event: TurnEvent, view: StreamView): Html {
  const ids = view.bubbleId ? describeBubble(view.bubbleId) : undefined;
  switch (event.type) {
    case 'started': {
      const head = view.describeCreated?.();
      return head ? renderCreated(head) : EMPTY;
    }
    case 'delta':
      // One span per token, appended: `white-space: pre-wrap` on the bubble keeps spaces and newlines.
      return ids ? renderPartial(`#${ids.text}`, 'beforeend', html`<span>${event.text}</span>`) : EMPTY;
    case 'status':
      // Appended to the text (empty before a reply's first words) until the next event removes it: a
      // call asking for the metadata alone must not wipe the text the user is reading.
      return ids ? renderPartial(`#${ids.text}`, 'beforeend', html`<span class="status" id="${ids.status}">${event.message}</span>`) : EMPTY;
    case 'retry':
      // The new attempt replaces the old text silently.
      return ids ? renderPartial(`#${ids.text}`, 'outerHTML', html`<div class="text" id="${ids.text}"></div>`) : EMPTY;
    case 'metadata_retry':
      // Only the metadata is asked for again: the text stays exactly as the user read it.
      return EMPTY;
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
      return renderGenerationStart(event, view.conversationId);
    case 'progress':
      return renderGenerationProgress(event);
    case 'image': {
      const image = { ...event, ...view.findImage?.(event.id) };
      return joinHtml([
        renderPartial('#image-frame', 'innerHTML', renderImage(image)),
        renderGenerationEnd(event.id),
        renderPartial('#image-announce', 'textContent', html`The image is ready.`),
        ids ? renderPartial(`#${ids.images}`, 'beforeend', renderThumbnail(image)) : joinHtml([renderPartial('#log-empty', 'delete'), renderPartial('#log', 'beforeend', renderGeneratedEntry(image))]),
      ]);
    }
    case 'error':
      if (!ids || view.imageStarted) {
        return joinHtml([
          view.generationId ? renderGenerationEnd(view.generationId) : EMPTY,
          renderPartial('#image-error', 'innerHTML', renderImageError(event.message)),
        ]);
      }
      return joinHtml([
        renderPartial(`#${ids.cursor}`, 'delete'),
        renderPartial(`#${ids.notes}`, 'beforeend', renderErrorBox(view.conversationId, event.message, view.userText)),
        // The message was not stored: its text goes back into the composer (web/easel.js puts it there).
        !view.started && view.userText !== undefined
          ? renderPartial('#composer-inbox', 'innerHTML', html`<div class="restore-text" data-text="${view.userText}"></div>`)
          : EMPTY,
      ]);
    case 'done':
      // Whatever ended the image, its bar ends with the stream.
      if (!ids) return view.generationId ? renderGenerationEnd(view.generationId) : EMPTY;
      return joinHtml([
        view.generationId ? renderGenerationEnd(view.generationId) : EMPTY,
        renderPartial(`#${ids.cursor}`, 'delete'),
        event.level === 'stopped' ? renderPartial(`#${ids.notes}`, 'beforeend', renderNotice('Stopped.')) : EMPTY,
        // A stored turn is now the last one: Copy and Regenerate on the reply, Edit on the message.
        renderPartial(
          `#${ids.actions}`,
          'beforeend',
          joinHtml([html`<button type="button" class="copy-message">Copy</button>`, view.started ? renderRegenerateButton() : EMPTY]),
        ),
        view.started && view.userText !== undefined
          ? renderPartial(`#${userBubbleId(view.bubbleId!)} .msg-actions`, 'beforeend', html`<button type="button" class="edit-message last-only">Edit</button>`)
          : EMPTY,
      ]);
  }
}

const GENERATION_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Element ids of one running generation; ids come from the core but are checked before use in a selector. */
function describeGeneration(generationId: string): { block: string; state: string; bar: string } | undefined {
  if (!GENERATION_ID.test(generationId)) return undefined;
  const block = `generation-${generationId}`;
  return { block, state: `${block}-state`, bar: `${block}-bar` };
}

/** One block per running generation (an auto image and a Generate click can overlap): text, bar, Cancel. */
function renderGenerationStart(event: Extract<TurnEvent, { type: 'generation' }>, conversationId: string): Html {
  const ids = describeGeneration(event.id);
  if (!ids) return EMPTY;
  const state = event.queued ? 'Waiting for the image backend: another image is being made first.' : 'Making the image…';
  return joinHtml([
    renderPartial('#image-error', 'innerHTML'),
    renderPartial(
      '#image-status',
      'beforeend',
      html`<div class="generation" id="${ids.block}">
<p class="image-state" id="${ids.state}">${state}</p>
<div class="progress-row">${renderProgressBar(ids.bar, {})}<button type="button" class="cancel" hx-post="${conversationPath(conversationId, '/images/cancel')}" hx-swap="none">Cancel</button></div>
</div>`,
    ),
    renderPartial('#image-announce', 'textContent', html`${state}`),
  ]);
}

function renderGenerationProgress(event: Extract<TurnEvent, { type: 'progress' }>): Html {
  const ids = describeGeneration(event.id);
  if (!ids) return EMPTY;
  return joinHtml([
    // Morphing leaves identical text untouched, so a queued image's line changes once, not per step.
    renderPartial(`#${ids.state}`, 'innerMorph', html`Making the image…`),
    renderPartial(`#${ids.bar}`, 'outerHTML', renderProgressBar(ids.bar, event)),
  ]);
}

function renderGenerationEnd(generationId: string): Html {
  const ids = describeGeneration(generationId);
  return ids ? renderPartial(`#${ids.block}`, 'delete') : EMPTY;
}

/**
 * A progressbar with aria-valuenow while the backend reports how far it is, and without it (an
 * indeterminate bar) when it does not, like sd-server. The native bar inside is only its picture.
 */
export function renderProgressBar(id: string, progress: { fraction?: number; step?: number; steps?: number; etaSeconds?: number }): Html {
  const { step, steps, etaSeconds } = progress;
  const hasSteps = step !== undefined && steps !== undefined && steps > 0;
  const fraction = progress.fraction ?? (hasSteps ? step / steps : undefined);
  // The time left is shown, not announced: it changes every second.
  const left = etaSeconds === undefined || !Number.isFinite(etaSeconds) ? '' : ` · about ${Math.max(1, Math.round(etaSeconds))} s left`;
  const label = hasSteps ? html`<span class="step">Step ${step} of ${steps}${left}</span>` : EMPTY;
  if (fraction === undefined || !Number.isFinite(fraction)) {
    return html`<div class="progress" id="${id}" role="progressbar" aria-label="Image progress" aria-valuemin="0" aria-valuemax="100" aria-valuetext="${hasSteps ? `Step ${step} of ${steps}` : 'Working'}"><progress max="100" aria-hidden="true"></progress>${label}</div>`;
  }
  const percent = Math.round(Math.min(1, Math.max(0, fraction)) * 100);
  const text = hasSteps ? `${percent}%, step ${step} of ${steps}` : `${percent}%`;
  return html`<div class="progress" id="${id}" role="progressbar" aria-label="Image progress" aria-valuemin="0" aria-valuemax="100" aria-valuenow="${percent}" aria-valuetext="${text}"><progress max="100" value="${percent}" aria-hidden="true"></progress>${label}</div>`;
}

/** A cancelled or failed image, said in the image area; the prompt pane is left as it was. */
export function renderImageError(message: string): Html {
  return html`<p class="image-error" role="alert">${renderMessage(message)}</p>`;
}

/** Hands the model's suggestion to web/easel.js, which decides whether it may fill the fields. */
function renderMetadataCarrier(event: Extract<TurnEvent, { type: 'metadata' }>): Html {
  const negative = event.negative_prompt === undefined ? EMPTY : html` data-negative-prompt="${event.negative_prompt}"`;
  return html`<div class="metadata" data-prompt="${event.prompt}" data-generate-image="${String(event.generate_image)}" data-steps="${event.steps}" data-cfg="${event.cfg}" data-seed="${event.seed}"${negative}></div>`;
}
