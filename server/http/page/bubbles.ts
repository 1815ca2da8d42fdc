// The chat's building blocks, shared by the full page (a reload shows the whole transcript) and the
// streamed fragments, so a bubble looks the same whether it was streamed or reloaded.
import type { ImageRecord } from '../../core/index.ts';
import { EMPTY, html, renderMessage, type Html } from './markup.ts';

export interface BubbleIds {
  bubble: string;
  text: string;
  cursor: string;
  notes: string;
  images: string;
  /** The status line shown in the text's place until the first words arrive. */
  status: string;
  /** Copy, the time, Regenerate. */
  actions: string;
}

export function describeBubble(bubbleId: string): BubbleIds {
  return {
    bubble: bubbleId,
    text: `${bubbleId}-text`,
    cursor: `${bubbleId}-cursor`,
    notes: `${bubbleId}-notes`,
    images: `${bubbleId}-images`,
    status: `${bubbleId}-status`,
    actions: `${bubbleId}-actions`,
  };
}

export function conversationPath(conversationId: string, rest = ''): string {
  return `/c/${encodeURIComponent(conversationId)}${rest}`;
}

/** How a message is shown: its time, and the controls only the latest message and reply offer. */
export interface MessageOptions {
  /** The element id (the stored turn's, or a streamed bubble's). */
  id?: string;
  /** ISO time, shown on hover (formatted in the reader's time zone by web/easel.js). */
  createdAt?: string;
  /** The conversation, for the controls that post to it. */
  conversationId?: string;
  /** The last message (Edit) or the last reply (Regenerate) that was not replaced. */
  last?: boolean;
  /** Regenerate or Edit asked again: kept, shown dimmed, without controls. */
  replaced?: boolean;
}

export function renderUserBubble(text: string, options: MessageOptions = {}): Html {
  const edit = options.last && !options.replaced ? html`<button type="button" class="edit-message last-only">Edit</button>` : EMPTY;
  return html`<article class="msg user${options.replaced ? ' replaced' : ''}"${options.id ? html` id="${options.id}"` : EMPTY}>
<span class="visually-hidden">You: </span>${options.replaced ? renderReplacedLabel() : EMPTY}<div class="text">${text}</div>
${renderMessageActions(options.createdAt, edit)}
</article>`;
}

/** Copy, the time on hover, and what else a message offers. */
export function renderMessageActions(createdAt: string | undefined, extra: Html = EMPTY): Html {
  return html`<div class="msg-actions">${createdAt ? renderTime(createdAt) : EMPTY}<button type="button" class="copy-message">Copy</button>${extra}</div>`;
}

/** A time as the server knows it (UTC); web/easel.js rewrites it in the reader's own time zone. */
export function renderTime(iso: string, className = 'msg-time'): Html {
  return html`<time class="${className}" datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')}</time>`;
}

function renderReplacedLabel(): Html {
  return html`<p class="replaced-label">Replaced</p>`;
}

/**
 * Regenerate on the last reply: web/easel.js submits the chat's one #regenerate-form, which stays in the
 * page while the new reply streams (this button goes away as the new turn starts).
 */
export function renderRegenerateButton(): Html {
  return html`<button type="button" class="regenerate-button last-only">Regenerate</button>`;
}

/** The stream source of every Regenerate of a conversation. */
export function renderRegenerateForm(conversationId: string): Html {
  return html`<form id="regenerate-form" hx-post="${conversationPath(conversationId, '/regenerate')}" hx-swap="none" hx-disable="#send" hx-indicator="#composer" data-stream hidden novalidate></form>`;
}

/**
 * What a picture shows about itself. The `image` event carries only the first fields; the stored
 * record adds the rest, and the large view shows whatever is known.
 */
export type ImageDetails = Pick<ImageRecord, 'url' | 'prompt' | 'width' | 'height'> &
  Partial<Pick<ImageRecord, 'seed' | 'negativePrompt' | 'steps' | 'cfg' | 'sampler' | 'model'>>;

export interface AssistantBubbleContent {
  text?: string;
  streaming?: boolean;
  notes?: Html;
  images?: readonly ImageDetails[];
  createdAt?: string;
  /** Shown dimmed with a label: Regenerate or Edit replaced it. */
  replaced?: boolean;
  /** Controls beside Copy (Regenerate on the last reply). */
  actions?: Html;
}

export function renderAssistantBubble(bubbleId: string, content: AssistantBubbleContent = {}): Html {
  const ids = describeBubble(bubbleId);
  return html`<article class="msg assistant${content.replaced ? ' replaced' : ''}" id="${ids.bubble}">
<span class="visually-hidden">Easel: </span>${content.replaced ? renderReplacedLabel() : EMPTY}<div class="text" id="${ids.text}">${content.text ?? ''}</div>${
    content.streaming ? html`<span class="typing" id="${ids.cursor}" aria-hidden="true"><i></i><i></i><i></i></span>` : EMPTY
  }
<div class="notes" id="${ids.notes}">${content.notes ?? EMPTY}</div>
<div class="thumbs" id="${ids.images}">${(content.images ?? []).map(renderThumbnail)}</div>
<div class="msg-actions" id="${ids.actions}">${content.createdAt ? renderTime(content.createdAt) : EMPTY}${content.streaming ? EMPTY : html`<button type="button" class="copy-message">Copy</button>`}${content.actions ?? EMPTY}</div>
</article>`;
}

export function renderDivider(): Html {
  return html`<div class="divider" role="separator" aria-label="Fresh start"><span>Fresh start</span></div>`;
}

export function renderNotice(text: string): Html {
  return html`<p class="notice">${text}</p>`;
}

/** An inline error; with the user's text it offers Retry, which sends exactly that text again. */
export function renderErrorBox(conversationId: string, message: string, retryText: string | undefined): Html {
  return html`<div class="error-box" role="alert">
<p class="error-text">${renderMessage(message)}</p>${retryText === undefined ? EMPTY : renderRetryForm(conversationId, retryText)}
</div>`;
}

function renderRetryForm(conversationId: string, text: string): Html {
  return html`<form class="retry" hx-post="${conversationPath(conversationId, '/messages')}" hx-swap="none" hx-disable="#send" hx-indicator="#composer" data-stream novalidate>
<input type="hidden" name="text" value="${text}"><button type="submit" class="retry-button">Retry</button>
</form>`;
}

/** Only our own /images/… URLs are shown: anything else in an event is dropped, not linked. */
export function isImageUrl(url: string): boolean {
  return /^\/images\/[A-Za-z0-9._-]+$/.test(url) && !url.includes('..');
}

const ALT_PROMPT_CHARS = 120;

function describeImage(image: ImageDetails): string {
  const prompt = image.prompt.length > ALT_PROMPT_CHARS ? `${image.prompt.slice(0, ALT_PROMPT_CHARS)}…` : image.prompt;
  return `Image: ${prompt}`;
}

/**
 * The settings travel as data attributes (escaped like any attribute) and web/easel.js copies them
 * into the large view with textContent, so a prompt can never become markup there either.
 */
function renderImageData(image: ImageDetails): Html {
  const optional = (name: string, value: string | number | null | undefined) =>
    value === undefined || value === null ? EMPTY : html` data-${name}="${value}"`;
  return html`data-image-view data-url="${image.url}" data-prompt="${image.prompt}"${optional('seed', image.seed)} data-width="${image.width}" data-height="${image.height}"${optional('negative-prompt', image.negativePrompt)}${optional('steps', image.steps)}${optional('cfg', image.cfg)}${optional('model', image.model)}`;
}

export function renderThumbnail(image: ImageDetails): Html {
  if (!isImageUrl(image.url)) return EMPTY;
  return html`<button type="button" class="thumb" aria-haspopup="dialog" ${renderImageData(image)}><img src="${image.url}" alt="${describeImage(image)}" width="${image.width}" height="${image.height}" loading="lazy"></button>`;
}

/** The newest picture, filling the image area; clicking it opens the same large view as a thumbnail. */
export function renderImage(image: ImageDetails): Html {
  if (!isImageUrl(image.url)) return renderNoImage();
  const model = image.model ? html` · ${image.model}` : EMPTY;
  return html`<button type="button" class="current" aria-haspopup="dialog" ${renderImageData(image)}><img class="current-image" src="${image.url}" alt="${describeImage(image)}" width="${image.width}" height="${image.height}"></button>
<p class="image-caption">Seed ${image.seed} · ${image.width} × ${image.height}${model}</p>`;
}

export function renderNoImage(): Html {
  return html`<p class="placeholder">No image yet.</p>`;
}

/** A picture made with the Generate button, shown in the chat where it was made. */
export function renderGeneratedEntry(image: ImageDetails): Html {
  if (!isImageUrl(image.url)) return EMPTY;
  return html`<article class="msg generated">
<p class="generated-label"><span class="visually-hidden">Easel: </span>Made with Generate from the prompt pane</p>
<div class="thumbs">${renderThumbnail(image)}</div>
</article>`;
}
