// The HTML renderer of a turn's events, the page's twin of the API's renderEventJson: each event
// becomes one SSE message whose data is htmx 4 <hx-partial> fragments with their own targets.
// It only renders: the protocol (withholding `---` and the JSON, the ladder) lives in the core.
import { raw } from 'hono/html';
import { decideTurnOffers, isImageId, statusOfDone, type ImageInProgress, type TurnEvent } from '../../core/index.ts';
import {
  conversationPath,
  describeBubble,
  renderAssistantBubble,
  renderCopyButton,
  renderDivider,
  renderEditButton,
  renderErrorBox,
  describeBatchEntry,
  renderGeneratedEntry,
  renderImage,
  renderLiveBlock,
  renderImageNote,
  renderNotice,
  renderRegenerateButton,
  renderReplyText,
  renderSendAgain,
  renderThumbnail,
  describeCompareEntry,
  describeCritique,
  renderCheckFailed,
  renderCheckStatus,
  renderCompareEntry,
  renderCritique,
  renderUserBubble,
  LAST_MESSAGE_SELECTOR,
  type BubbleIds,
  type CritiqueDetails,
  type ImageDetails,
} from './bubbles.ts';
import { renderCreated, type ChatHead } from './library.ts';
import { createMarkdownStream, type MarkdownStream } from './markdown.ts';
import { EMPTY, html, joinHtml, renderMessage, renderPartial, type Html } from './markup.ts';
import { renderPaneUpdate } from './pane.ts';

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
  /** Set by the caller while the last event rendered was a `status`: the next event removes that line. */
  statusShown?: boolean;
  /** Set by the caller once the `started` event passed: the message is stored (Edit and Regenerate may follow). */
  started?: boolean;
  /** This message creates the conversation (the empty page): its head, once it exists. */
  describeCreated?: () => ChatHead | undefined;
  /** The message a reset's "Send again" sends, when `userText` is not it (Regenerate asks the last one again). */
  findLastMessage?: () => string | undefined;
  /** The renderer's own state: the reply's Markdown, split into finished blocks as it streams. */
  markdown?: MarkdownStream;
  /** The renderer's own state: the reply's text is final (its last block rendered, or replaced whole). */
  replyEnded?: boolean;
  /** Set by the caller once the reply's `done` passed: an image after it is followed on its own stream. */
  replied?: boolean;
  /** Drawn by a page's live view: another tab or client made it (web/js/pane.js tells a prompt being typed). */
  live?: boolean;
  /** The stream of a Check of this picture (its id): its failure is said under the picture. */
  checking?: string;
  /** The stream of a Describe: what it says goes beside the prompt, and its new prompt replaces the one shown. */
  describing?: boolean;
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
      return ids ? renderReplyDelta(view, ids, event.text) : EMPTY;
    case 'status':
      // Appended to the text (empty before a reply's first words) until the next event removes it: a
      // call asking for the metadata alone must not wipe the text the user is reading.
      return ids ? renderPartial(`#${ids.text}`, 'beforeend', html`<span class="status" id="${ids.status}">${event.message}</span>`) : EMPTY;
    case 'retry':
      // The new attempt replaces the old text silently.
      if (!ids) return EMPTY;
      view.markdown = undefined;
      view.replyEnded = false;
      return renderPartial(`#${ids.text}`, 'outerHTML', renderReplyText(ids, undefined));
    case 'metadata_retry':
      // Only the metadata is asked for again: the text stays exactly as the user read it.
      return EMPTY;
    case 'metadata':
      return joinHtml([
        ids ? renderReplyEnd(view, ids) : EMPTY,
        ids && event.notices.length > 0 ? renderPartial(`#${ids.notes}`, 'beforeend', joinHtml(event.notices.map(renderNotice))) : EMPTY,
      ]);
    case 'pane':
      // The server decided what the pane holds after this reply; the page shows exactly that. A description is
      // the prompt the user asked for (what they typed was saved first): it replaces the prompt shown.
      return renderPaneUpdate(view.conversationId, event, view.live ? { live: true } : view.describing ? { force: true } : {});
    case 'critique':
      return renderCritiqueShown(event);
    case 'description':
      return renderDescribeStatus(html`The prompt now describes the picture (${event.subject}). Undo brings yours back.`);
    case 'image_not_made':
      return ids ? renderPartial(`#${ids.notes}`, 'beforeend', renderImageNote(event, true)) : EMPTY;
    case 'reset': {
      if (!ids) return EMPTY;
      view.replyEnded = true;
      const offers = decideTurnOffers('reset', { last: true, stored: view.started === true });
      const resend = offers.sendAgain && view.started ? (view.userText ?? view.findLastMessage?.()) : undefined;
      return joinHtml([
        renderPartial(`#${ids.text}`, 'outerHTML', renderReplyText(ids, event.message)),
        resend === undefined ? EMPTY : renderPartial(`#${ids.notes}`, 'beforeend', renderSendAgain(resend)),
        renderPartial(`#${ids.bubble}`, 'afterend', renderDivider()),
      ]);
    }
    case 'generation':
      // After the reply's `done` the chat is free: the image is followed by a stream of its own.
      return renderGenerationStart(event, view.conversationId, view.replied && view.bubbleId ? { bubbleId: view.bubbleId } : undefined);
    case 'progress':
      return renderGenerationProgress(event);
    case 'image': {
      // The event carries every setting the image was made with, as stored: the thumbnail needs nothing else.
      // A batch's images come one by one: its bar ends with the last, and they share one entry in the chat.
      const batch = event.batch;
      const lastOfBatch = isLastImage(event);
      // The thumbnail's Check posts to its conversation.
      const shown = { ...event, conversationId: view.conversationId };
      const generationId = view.generationId ?? event.id;
      const batchEntry = batch === undefined ? undefined : describeBatchEntry(generationId);
      // A comparison's entry was drawn with its `generation` event (or by the reload): each image joins its side.
      const entry =
        event.compare !== undefined
          ? renderPartial(`#${describeCompareEntry(event.compare.id).thumbs(event.compare.side)}`, 'beforeend', renderThumbnail(shown))
          : batch !== undefined && batch.index > 0 && batchEntry
          ? renderPartial(`#${batchEntry.thumbs}`, 'beforeend', renderThumbnail(shown))
          : joinHtml([renderPartial('#log-empty', 'delete'), renderPartial('#log', 'beforeend', renderGeneratedEntry(shown, batch === undefined ? undefined : generationId))]);
      return joinHtml([
        renderPartial('#image-frame', 'innerHTML', renderImage(event)),
        lastOfBatch ? renderGenerationEnd(generationId) : EMPTY,
        renderPartial('#image-announce', 'textContent', batch === undefined ? html`The image is ready.` : html`Image ${batch.index + 1} of ${batch.count} is ready.`),
        ids ? renderPartial(`#${ids.images}`, 'beforeend', renderThumbnail(shown)) : entry,
      ]);
    }
    case 'error':
      if (view.checking !== undefined) return renderCheckFailedShown(view.checking, event.code, event.message);
      if (view.describing) return renderDescribeStatus(renderMessage(event.message), event.code === 'vision_cancelled' ? 'note' : 'error');
      if (!ids || view.imageStarted) {
        return joinHtml([
          view.generationId ? renderGenerationEnd(view.generationId) : EMPTY,
          // A Cancel (or Stop) the user pressed is a quiet note, not an alert.
          renderPartial('#image-error', 'innerHTML', event.code === 'image_cancelled' ? renderCancelNote(event.message) : renderImageError(event.message)),
        ]);
      }
      // Not an error of the turn: the reply was cut by the length limit before a reset, said as a notice.
      if (event.code === 'reply_truncated') return renderPartial(`#${ids.notes}`, 'beforeend', renderNotice(event.message));
      return joinHtml([
        renderReplyEnd(view, ids),
        renderPartial(`#${ids.cursor}`, 'delete'),
        // Retry asks the stored message again (like Regenerate); a message that was not stored goes back
        // into the composer instead.
        renderPartial(`#${ids.notes}`, 'beforeend', renderErrorBox(event.message, { retry: decideTurnOffers('error', { last: true, stored: view.started === true }).retry })),
        // The message was not stored: its text goes back into the composer (web/easel.js puts it there).
        !view.started && view.userText !== undefined
          ? renderPartial('#composer-inbox', 'innerHTML', html`<div class="restore-text" data-text="${view.userText}"></div>`)
          : EMPTY,
      ]);
    case 'done':
      // Whatever ended the image, its bar ends with the stream.
      if (!ids) return view.generationId ? renderGenerationEnd(view.generationId) : EMPTY;
      // The same decision a reload makes (views.ts): the reply just ended is the last one.
      const offers = decideTurnOffers(statusOfDone(event.level), { last: true, stored: view.started === true });
      return joinHtml([
        renderReplyEnd(view, ids),
        view.generationId ? renderGenerationEnd(view.generationId) : EMPTY,
        renderPartial(`#${ids.cursor}`, 'delete'),
        offers.notice === undefined ? EMPTY : renderPartial(`#${ids.notes}`, 'beforeend', renderNotice(offers.notice)),
        // A stored turn is now the last one: Copy and Regenerate on the reply, Edit on the message (views.ts decides the same).
        renderPartial(`#${ids.actions}`, 'beforeend', joinHtml([renderCopyButton('reply'), offers.regenerate ? renderRegenerateButton() : EMPTY])),
        // Its own message when this stream drew it; else (Regenerate) the message it asked again.
        offers.edit
          ? renderPartial(`${view.userText === undefined ? LAST_MESSAGE_SELECTOR : `#${userBubbleId(view.bubbleId!)}`} .msg-actions`, 'beforeend', renderEditButton())
          : EMPTY,
      ]);
  }
}

/**
 * A piece of the reply: appended as text to the Markdown block in progress (one text node, not an element
 * per token), or, when it finished blocks, those blocks rendered once before the new block in progress.
 */
function renderReplyDelta(view: StreamView, ids: BubbleIds, text: string): Html {
  view.markdown ??= createMarkdownStream();
  const step = view.markdown.push(text);
  if (step.kind === 'append') return step.text === '' ? EMPTY : renderPartial(`#${ids.live}`, 'beforeend', html`${step.text}`);
  return renderPartial(`#${ids.live}`, 'outerHTML', joinHtml([raw(step.html), renderLiveBlock(ids, step.text)]));
}

/** The reply's text is final: its last block is rendered in place of the block in progress (once). */
function renderReplyEnd(view: StreamView, ids: BubbleIds): Html {
  if (view.replyEnded) return EMPTY;
  view.replyEnded = true;
  const last = view.markdown?.flush() ?? '';
  return last === '' ? renderPartial(`#${ids.live}`, 'delete') : renderPartial(`#${ids.live}`, 'outerHTML', raw(last));
}

const GENERATION_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** Element ids of one running generation; ids come from the core but are checked before use in a selector. */
function describeGeneration(generationId: string): { block: string; state: string; bar: string } | undefined {
  if (!GENERATION_ID.test(generationId)) return undefined;
  const block = `generation-${generationId}`;
  return { block, state: `${block}-state`, bar: `${block}-bar` };
}

/** One block per running generation (an auto image and a Generate click can overlap): text, bar, Cancel. */
function renderGenerationStart(event: Extract<TurnEvent, { type: 'generation' }>, conversationId: string, follow?: { bubbleId: string }): Html {
  const ids = describeGeneration(event.id);
  if (!ids) return EMPTY;
  return joinHtml([
    renderPartial('#image-error', 'innerHTML'),
    // A comparison's two columns come first, empty: its images join them as they come.
    event.compare === undefined ? EMPTY : joinHtml([renderPartial('#log-empty', 'delete'), renderPartial('#log', 'beforeend', renderCompareEntry(conversationId, event.id, event.compare))]),
    renderPartial('#image-status', 'beforeend', renderGenerationBlock(conversationId, { id: event.id, queued: event.queued === true, ...(event.place === undefined ? {} : { place: event.place }) }, follow)),
    renderPartial('#image-announce', 'textContent', html`${describeGenerationState(event.queued === true, event.place)}`),
  ]);
}

function describeGenerationState(queued: boolean, place?: number): string {
  if (!queued) return 'Making the image…';
  return place === undefined ? 'Waiting for the image backend: another image is being made first.' : `Waiting — ${describePlace(place)} in line`;
}

/** 1st, 2nd, 3rd, 4th, … 11th, 12th, 13th, 21st. */
export function describePlace(place: number): string {
  const tens = place % 100;
  const suffix = tens >= 11 && tens <= 13 ? 'th' : (['th', 'st', 'nd', 'rd'][place % 10] ?? 'th');
  return `${place}${suffix}`;
}

const BUBBLE_ID = /^(turn-\d{1,15}|reply-[a-f0-9]{12})$/;

/** A bubble id as the page makes them (a stored turn's, a streamed reply's): the only kind put in a selector. */
export function isBubbleId(value: unknown): value is string {
  return typeof value === 'string' && BUBBLE_ID.test(value);
}

/**
 * The block of one image being made. `follow`: the image runs on its own (an automatic one, after its reply):
 * the block opens a stream of its own that brings its progress and puts it into that reply's bubble.
 */
export function renderGenerationBlock(
  conversationId: string,
  image: Pick<ImageInProgress, 'id' | 'queued' | 'place' | 'progress'>,
  follow?: { bubbleId?: string; skip?: readonly string[] },
): Html {
  const ids = describeGeneration(image.id);
  if (!ids) return EMPTY;
  const state = image.queued ? describeGenerationState(true, image.place) : image.progress ? 'Making the image…' : describeGenerationState(false);
  // Into its reply's bubble; without one (Generate's), into the chat where it ends.
  const path = conversationPath(conversationId, `/images/${image.id}/events`);
  // `skip`: its pictures the page shows already (a reload mid-batch), named so none is drawn twice or missed.
  const query = new URLSearchParams();
  if (follow?.bubbleId !== undefined) query.set('bubble', follow.bubbleId);
  if (follow?.skip !== undefined) query.set('skip', follow.skip.filter(isImageId).join(','));
  const followUrl = !follow || (follow.bubbleId !== undefined && !isBubbleId(follow.bubbleId)) ? undefined : query.size === 0 ? path : `${path}?${query}`;
  return html`<div class="generation" id="${ids.block}">
<p class="image-state" id="${ids.state}">${state}</p>
<div class="progress-row">${renderProgressBar(ids.bar, image.progress ?? {})}<button type="button" class="cancel" hx-post="${conversationPath(conversationId, `/images/${image.id}/cancel`)}" hx-swap="none">Cancel</button></div>${
    followUrl ? html`<div class="image-follower" hidden hx-get="${followUrl}" hx-trigger="load" hx-swap="none"></div>` : EMPTY
  }
</div>`;
}

function renderGenerationProgress(event: Extract<TurnEvent, { type: 'progress' }>): Html {
  const ids = describeGeneration(event.id);
  if (!ids) return EMPTY;
  // Still waiting: only its place in line changes.
  if (event.place !== undefined) return renderPartial(`#${ids.state}`, 'innerMorph', html`${describeGenerationState(true, event.place)}`);
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
  const known = fraction !== undefined && Number.isFinite(fraction);
  const percent = known ? Math.round(Math.min(1, Math.max(0, fraction)) * 100) : undefined;
  // Shown beside the bar; the time left is not announced: it changes every second.
  const parts = [
    percent === undefined ? undefined : `${percent}%`,
    hasSteps ? `step ${step} of ${steps}` : undefined,
    etaSeconds === undefined || !Number.isFinite(etaSeconds) ? undefined : `about ${describeTimeLeft(etaSeconds)} left`,
  ].filter((part) => part !== undefined);
  const shown = parts.join(' · ');
  const label = shown === '' ? EMPTY : html`<span class="step">${shown.charAt(0).toUpperCase()}${shown.slice(1)}</span>`;
  if (percent === undefined) {
    // Stryker disable next-line StringLiteral: Step n of m: unreachable: a step and a positive total make the bar determinate (adapters report whole steps)
    return html`<div class="progress" id="${id}" role="progressbar" aria-label="Image progress" aria-valuemin="0" aria-valuemax="100" aria-valuetext="${hasSteps ? `Step ${step} of ${steps}` : 'Working'}"><progress max="100" aria-hidden="true"></progress>${label}</div>`;
  }
  const text = hasSteps ? `${percent}%, step ${step} of ${steps}` : `${percent}%`;
  return html`<div class="progress" id="${id}" role="progressbar" aria-label="Image progress" aria-valuemin="0" aria-valuemax="100" aria-valuenow="${percent}" aria-valuetext="${text}"><progress max="100" value="${percent}" aria-hidden="true"></progress>${label}</div>`;
}

/** `8 s`, `2 min`: the backend's estimate, rounded as an estimate. */
function describeTimeLeft(seconds: number): string {
  const rounded = Math.max(1, Math.round(seconds));
  return rounded < 90 ? `${rounded} s` : `${Math.round(rounded / 60)} min`;
}

/** A cancelled image, said quietly in the image area. */
export function renderCancelNote(message: string): Html {
  return html`<p class="image-note" role="status">${renderMessage(message)}</p>`;
}

/** A failed image, said in the image area; the prompt pane is left as it was. */
export function renderImageError(message: string): Html {
  return html`<p class="image-error" role="alert">${renderMessage(message)}</p>`;
}

/**
 * Whether an image ends its generation: the only one, a batch's last, or side B's last of a comparison. The
 * sender's stream and every other page's live view end the generation's bar on the same image.
 */
export function isLastImage(event: Extract<TurnEvent, { type: 'image' }>): boolean {
  const { batch, compare } = event;
  return (compare === undefined || compare.side === 'b') && (batch === undefined || batch.index >= batch.count - 1);
}

/**
 * A reference image added: its entry in the chat and the image area. Drawn by the page that added it (its answer)
 * and by every page's live view, in either order, so the entry replaces itself (its id is its image's) instead
 * of showing twice.
 */
export function renderReferenceAdded(image: ImageDetails & { id: string }): Html {
  if (!isImageId(image.id)) return EMPTY;
  return joinHtml([
    renderPartial('#log-empty', 'delete'),
    renderPartial(`#${describeBatchEntry(image.id).entry}`, 'delete'),
    renderPartial('#log', 'beforeend', renderGeneratedEntry([image], image.id)),
    renderPartial('#image-frame', 'innerHTML', renderImage(image)),
  ]);
}

/** The row of thumbnails holding a picture (each carries its id): its check is said right under it. */
function rowOf(imageId: string): string {
  return `#log .thumbs:has([data-image-id="${imageId}"])`;
}

/**
 * A picture's critique under its row, in place of its "Checking…" line and of an earlier critique. Drawn by the page
 * that asked (its stream) and by every page's live view, in either order: it replaces itself, never shows twice.
 */
export function renderCritiqueShown(critique: CritiqueDetails): Html {
  if (!isImageId(critique.imageId)) return EMPTY;
  const ids = describeCritique(critique.imageId);
  return joinHtml([
    renderPartial(`#${ids.status}`, 'delete'),
    renderPartial(`#${ids.block}`, 'delete'),
    renderPartial(rowOf(critique.imageId), 'afterend', renderCritique(critique)),
  ]);
}

/** "Checking the picture with <model>…" under the picture (the page that asked, and every page live: `check_started`). */
export function renderCheckStarted(conversationId: string, imageId: string, model: string): Html {
  if (!isImageId(imageId)) return EMPTY;
  return joinHtml([renderPartial(`#${describeCritique(imageId).status}`, 'delete'), renderPartial(rowOf(imageId), 'afterend', renderCheckStatus(conversationId, imageId, model))]);
}

/** Why a check failed, in place of its "Checking…" line (the page that asked, and every page live: `check_failed`). */
export function renderCheckFailedShown(imageId: string, code: string, message: string): Html {
  if (!isImageId(imageId)) return EMPTY;
  return joinHtml([renderPartial(`#${describeCritique(imageId).status}`, 'delete'), renderPartial(rowOf(imageId), 'afterend', renderCheckFailed(imageId, code, message))]);
}

/** Describe's line beside the prompt: what it is doing, what it wrote, or why it could not. */
export function renderDescribeStatus(content: Html, kind: 'progress' | 'note' | 'error' = 'progress'): Html {
  const text = kind === 'error' ? html`<span class="describe-error" role="alert">${content}</span>` : content;
  return renderPartial('#describe-status', 'innerHTML', text);
}
