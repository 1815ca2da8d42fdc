// The chat's building blocks, shared by the full page (a reload shows the whole transcript) and the
// streamed fragments, so a bubble looks the same whether it was streamed or reloaded.
import type { ImageRecord } from '../../core/index.ts';
import { EMPTY, html, type Html } from './markup.ts';

export interface BubbleIds {
  bubble: string;
  text: string;
  cursor: string;
  notes: string;
  images: string;
}

export function describeBubble(bubbleId: string): BubbleIds {
  return {
    bubble: bubbleId,
    text: `${bubbleId}-text`,
    cursor: `${bubbleId}-cursor`,
    notes: `${bubbleId}-notes`,
    images: `${bubbleId}-images`,
  };
}

export function conversationPath(conversationId: string, rest = ''): string {
  return `/c/${encodeURIComponent(conversationId)}${rest}`;
}

export function renderUserBubble(text: string, id?: string): Html {
  return html`<article class="msg user"${id ? html` id="${id}"` : EMPTY}>
<span class="visually-hidden">You: </span><div class="text">${text}</div>
</article>`;
}

export interface AssistantBubbleContent {
  text?: string;
  streaming?: boolean;
  notes?: Html;
  images?: readonly Pick<ImageRecord, 'url' | 'prompt' | 'seed' | 'width' | 'height'>[];
}

export function renderAssistantBubble(bubbleId: string, content: AssistantBubbleContent = {}): Html {
  const ids = describeBubble(bubbleId);
  return html`<article class="msg assistant" id="${ids.bubble}">
<span class="visually-hidden">Easel: </span><div class="text" id="${ids.text}">${content.text ?? ''}</div>${
    content.streaming ? html`<span class="typing" id="${ids.cursor}" aria-hidden="true"><i></i><i></i><i></i></span>` : EMPTY
  }
<div class="notes" id="${ids.notes}">${content.notes ?? EMPTY}</div>
<div class="thumbs" id="${ids.images}">${(content.images ?? []).map(renderThumbnail)}</div>
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
<p class="error-text">${message}</p>${retryText === undefined ? EMPTY : renderRetryForm(conversationId, retryText)}
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

export function renderThumbnail(image: Pick<ImageRecord, 'url' | 'prompt' | 'seed' | 'width' | 'height'>): Html {
  if (!isImageUrl(image.url)) return EMPTY;
  return html`<a class="thumb" href="${image.url}" target="_blank" rel="noopener"><img src="${image.url}" alt="${`Image: ${image.prompt}`}" width="${image.width}" height="${image.height}" loading="lazy"></a>`;
}

export function renderImage(image: Pick<ImageRecord, 'url' | 'prompt' | 'seed' | 'width' | 'height'>): Html {
  if (!isImageUrl(image.url)) return html`<p class="placeholder">No image yet.</p>`;
  return html`<a href="${image.url}" target="_blank" rel="noopener"><img class="current-image" src="${image.url}" alt="${`Image: ${image.prompt}`}" width="${image.width}" height="${image.height}"></a>
<p class="image-caption">Seed ${image.seed} · ${image.width} × ${image.height}</p>`;
}
