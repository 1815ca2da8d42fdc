// The chat's building blocks, shared by the full page (a reload shows the whole transcript) and the
// streamed fragments, so a bubble looks the same whether it was streamed or reloaded.
import { isGenerateOffered, nameImageDownload, type CompareSide, type CompareVersion, type ImageMadeWith, type ImageRecord, type ImageSkipReason, type TurnEvent } from '../../core/index.ts';
import { raw } from 'hono/html';
import { createMarkdownStream, renderMarkdown, type MarkdownStream } from './markdown.ts';
import { EMPTY, html, joinHtml, renderMessage, type Html } from './markup.ts';
import { diffPrompts, type DiffPart } from '../../core/prompt-diff.ts';

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
  /** While a reply streams: the Markdown block in progress, shown as text after the finished blocks. */
  live: string;
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
    live: `${bubbleId}-live`,
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
  const edit = options.last && !options.replaced ? renderEditButton() : EMPTY;
  return html`<article class="msg user${options.replaced ? ' replaced' : ''}"${options.id ? html` id="${options.id}"` : EMPTY}>
<span class="visually-hidden">You: </span>${options.replaced ? renderReplacedLabel() : EMPTY}<div class="text">${text}</div>
${renderMessageActions(options.createdAt, joinHtml([renderCopyButton('message'), edit]))}
</article>`;
}

/** Edit on the last message (web/js/edit.js puts its text in the composer); a new turn removes it. */
export function renderEditButton(): Html {
  return html`<button type="button" class="edit-message last-only">Edit</button>`;
}

/**
 * The last message shown that was not replaced, as a selector: the message a Regenerate asked again, whose
 * bubble may have been drawn by a reload (`turn-…`) or live (`reply-…-user`), so its id is not known.
 */
export const LAST_MESSAGE_SELECTOR = '#log > .msg.user:not(.replaced):not(:has(~ .msg.user:not(.replaced)))';

/** The time on hover, then what a message offers (Copy, Edit). */
export function renderMessageActions(createdAt: string | undefined, buttons: Html = EMPTY): Html {
  return html`<div class="msg-actions">${createdAt ? renderTime(createdAt) : EMPTY}${buttons}</div>`;
}

/**
 * Copy, named for the message it copies: a screen reader listing the buttons hears "Copy your message" and
 * "Copy this reply", not a row of "Copy". The visible word stays "Copy" (the name starts with it). The same
 * button live (render-event.ts) and after a reload; web/js/messages.js says "Copied" in both while it shows.
 */
export function renderCopyButton(of: 'reply' | 'message'): Html {
  return html`<button type="button" class="copy-message" aria-label="${of === 'reply' ? 'Copy this reply' : 'Copy your message'}">Copy</button>`;
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
 * What a picture shows about itself: the `image` event and the stored record carry the same settings, and
 * the large view shows whatever is known.
 */
export type ImageDetails = Pick<ImageRecord, 'url' | 'prompt' | 'width' | 'height'> &
  Partial<ImageMadeWith> & {
    id?: string;
    /** Its conversation (a stored record has it; a streamed image is given it): Check posts there. */
    conversationId?: string;
    /** Its latest check, drawn under its row of thumbnails (a reload; live, the `critique` event draws it). */
    critique?: CritiqueDetails;
  };

/** What a check found, as the `critique` event and a stored check both carry it. */
export type CritiqueDetails = Pick<Extract<TurnEvent, { type: 'critique' }>, 'imageId' | 'model' | 'matches' | 'misses' | 'revisedPrompt'>;

/** The two strengths the page offers for Vary (the API takes any from 0.05 to 1). */
export const VARY_CHOICES = [
  { label: 'Vary (subtle)', strength: 0.35 },
  { label: 'Vary (strong)', strength: 0.65 },
] as const;

/** An image id the page may put in a form value (the store's are 32 hex characters). */
function isImageId(id: string | undefined): id is string {
  return id !== undefined && /^[A-Za-z0-9_-]{1,64}$/.test(id);
}

/**
 * Vary (subtle) and Vary (strong) on an image: submit buttons of the prompt pane's #generate-form with
 * `from=<imageId>:<strength>`, so the image is made from the prompt and settings shown, starting from this one.
 * web/js/vary.js disables them, saying why, where the image server cannot vary or the prompt is empty.
 */
export function renderVaryButtons(image: ImageDetails): Html {
  if (!isImageId(image.id)) return EMPTY;
  const id = image.id;
  return html`<span class="vary-actions">${VARY_CHOICES.map(
    (choice) => html`<button type="submit" form="generate-form" name="from" value="${id}:${choice.strength}" class="vary quiet" aria-describedby="vary-help">${choice.label}</button>`,
  )}</span>`;
}

/**
 * Check on a generated picture (a reference image was made from no prompt: nothing to check it against): its own
 * stream (POST …/images/:imageId/check) says "Checking…" under the picture's row, then what the vision model found.
 */
export function renderCheckButton(image: ImageDetails): Html {
  if (!isImageId(image.id) || image.conversationId === undefined || isReference(image)) return EMPTY;
  return html`<button type="button" class="check-image quiet" hx-post="${conversationPath(image.conversationId, `/images/${image.id}/check`)}" hx-swap="none" hx-disable="this" title="Ask the vision model whether the picture shows what you asked for">Check</button>`;
}

/** The element ids of a picture's check under its row: the "Checking…" line (or why it failed), and the critique. */
export function describeCritique(imageId: string): { status: string; block: string; title: string } {
  return { status: `critique-status-${imageId}`, block: `critique-${imageId}`, title: `critique-${imageId}-title` };
}

/**
 * What the vision model found: what the picture shows of the request, what is missing or wrong (and what it shows
 * instead), and Fix and regenerate, a submit button of the prompt pane's #generate-form (`fix=<imageId>`): the
 * revised prompt becomes the prompt and the picture is made again on its seed. Nothing missed: no button. Every
 * word is the model's, escaped. The same live, in every tab and after a reload.
 */
export function renderCritique(critique: CritiqueDetails): Html {
  if (!isImageId(critique.imageId)) return EMPTY;
  const ids = describeCritique(critique.imageId);
  const matches = critique.matches.length > 0 ? html`<ul class="critique-matches">${critique.matches.map((match) => html`<li>${match}</li>`)}</ul>` : html`<p class="critique-none">Nothing of what was asked.</p>`;
  const misses =
    critique.misses.length > 0
      ? html`<ul class="critique-misses">${critique.misses.map((miss) => html`<li><span class="critique-element">${miss.element}</span> — <span class="critique-evidence">${miss.evidence}</span></li>`)}</ul>`
      : html`<p class="critique-none">Nothing: the picture shows what was asked.</p>`;
  const fix =
    critique.misses.length > 0
      ? html`<button type="submit" form="generate-form" name="fix" value="${critique.imageId}" class="fix-image" title="Make the picture again on its seed from the revised prompt: ${critique.revisedPrompt}">Fix and regenerate</button>`
      : EMPTY;
  return html`<section class="critique" id="${ids.block}" aria-labelledby="${ids.title}">
<h3 class="critique-title" id="${ids.title}">Checked by ${critique.model}</h3>
<p class="critique-label">Shows:</p>${matches}
<p class="critique-label">Missing or wrong:</p>${misses}${fix}
</section>`;
}

/** The latest check of each picture of a row, under it (a reload draws them where the live page did). */
function renderCritiques(images: readonly ImageDetails[]): Html {
  return joinHtml(images.flatMap((image) => (image.critique ? [renderCritique(image.critique)] : [])));
}

/** While the vision model looks: said under the picture's row until its critique (or why it failed) takes its place. */
export function renderCheckStatus(conversationId: string, imageId: string, model: string): Html {
  if (!isImageId(imageId)) return EMPTY;
  // Cancel ends the conversation's checks (and so the check-and-correct loop); the pictures being made go on.
  return html`<p class="critique-status" id="${describeCritique(imageId).status}" role="status"><span class="critique-status-text">Checking the picture with ${model}…</span> <button type="button" class="cancel quiet" hx-post="${conversationPath(conversationId, '/checks/cancel')}" hx-swap="none">Cancel</button></p>`;
}

/** A check that could not be made or failed, in its place under the picture: a cancel quietly, anything else as an alert. */
export function renderCheckFailed(imageId: string, code: string, message: string): Html {
  if (!isImageId(imageId)) return EMPTY;
  const cancelled = code === 'vision_cancelled';
  return html`<p class="critique-status${cancelled ? '' : ' critique-failed'}" id="${describeCritique(imageId).status}" role="${cancelled ? 'status' : 'alert'}">${renderMessage(message)}</p>`;
}

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
  // Busy while it streams: a screen reader reads the finished reply once, not every token (web/easel.js
  // clears it when the typing dots go).
  return html`<article class="msg assistant${content.replaced ? ' replaced' : ''}" id="${ids.bubble}"${content.streaming ? html` aria-busy="true"` : EMPTY}>
<span class="visually-hidden">Easel: </span>${content.replaced ? renderReplacedLabel() : EMPTY}${content.streaming && content.text ? renderStreamingText(ids, content.text).html : renderReplyText(ids, content.streaming ? undefined : (content.text ?? ''))}${
    content.streaming ? html`<span class="typing" id="${ids.cursor}" aria-hidden="true"><i></i><i></i><i></i></span>` : EMPTY
  }
<div class="notes" id="${ids.notes}">${content.notes ?? EMPTY}</div>
<div class="thumbs" id="${ids.images}">${(content.images ?? []).map(renderThumbnail)}</div>${renderCritiques(content.images ?? [])}
<div class="msg-actions" id="${ids.actions}">${content.createdAt ? renderTime(content.createdAt) : EMPTY}${content.streaming ? EMPTY : renderCopyButton('reply')}${content.actions ?? EMPTY}</div>
</article>`;
}

/**
 * A reply's text as Markdown; `undefined` while it streams: then only an empty block in progress, which
 * render-event.ts fills and turns into finished blocks.
 */
export function renderReplyText(ids: BubbleIds, text: string | undefined): Html {
  return html`<div class="text md" id="${ids.text}">${text === undefined ? renderLiveBlock(ids, '') : renderMarkdown(text)}</div>`;
}

/**
 * A reply still being written, as far as it is: its finished blocks rendered and the block in progress as text,
 * exactly as the live renderer would have drawn them; `stream` goes on from there (a reload, a second tab).
 */
export function renderStreamingText(ids: BubbleIds, text: string): { html: Html; stream: MarkdownStream } {
  const stream = createMarkdownStream();
  const step = stream.push(text);
  const finished = step.kind === 'blocks' ? raw(step.html) : EMPTY;
  return { html: html`<div class="text md" id="${ids.text}">${finished}${renderLiveBlock(ids, step.text)}</div>`, stream };
}

/** The Markdown block being written, shown as its source text until it is finished. */
export function renderLiveBlock(ids: BubbleIds, text: string): Html {
  return html`<div class="md-live" id="${ids.live}">${text}</div>`;
}

export function renderDivider(): Html {
  return html`<div class="divider" role="separator" aria-label="Fresh start"><span>Fresh start</span></div>`;
}

export function renderNotice(text: string): Html {
  return html`<p class="notice">${text}</p>`;
}

/**
 * A reply said its prompt was ready and no image was made: why, and (on the last reply, where it helps) a
 * Generate button, which submits the prompt pane's Generate form: the image is made from what the pane shows.
 */
export function renderImageNote(note: { reason: ImageSkipReason; message: string }, withGenerate: boolean): Html {
  const generate =
    withGenerate && isGenerateOffered(note.reason)
      ? html`<button type="submit" form="generate-form" class="note-generate last-only">Generate</button>`
      : EMPTY;
  return html`<div class="image-note" data-reason="${note.reason}"><p class="image-note-text">${renderMessage(note.message)}</p>${generate}</div>`;
}

/**
 * An inline error. Retry (only on the last turn: a new turn removes it) asks the stored message again
 * through the chat's #regenerate-form, so the failed reply is replaced, not repeated.
 */
export function renderErrorBox(message: string, options: { retry: boolean }): Html {
  return html`<div class="error-box" role="alert">
<p class="error-text">${renderMessage(message)}</p>${options.retry ? html`<button type="button" class="retry-button last-only">Retry</button>` : EMPTY}
</div>`;
}

/**
 * After a reset: sends the user's message again, into the fresh context, through the chat's one
 * #resend-form (a stream's source must stay in the page while it streams; this button goes as it starts).
 */
export function renderSendAgain(text: string): Html {
  return html`<div class="send-again last-only"><button type="button" class="send-again-button" data-text="${text}">Send again</button><span class="hint">sends your message again in the fresh start</span></div>`;
}

/** The stream source of "Send again": its text is set from the button just before it is submitted. */
export function renderResendForm(conversationId: string): Html {
  return html`<form id="resend-form" hx-post="${conversationPath(conversationId, '/messages')}" hx-swap="none" hx-disable="#send" hx-indicator="#composer" data-stream hidden novalidate><input type="hidden" id="resend-text" name="text" value=""></form>`;
}

/** Only our own /images/… URLs are shown: anything else in an event is dropped, not linked. */
export function isImageUrl(url: string): boolean {
  return /^\/images\/[A-Za-z0-9._-]+$/.test(url) && !url.includes('..');
}

const ALT_PROMPT_CHARS = 120;

/** A reference image the user brought (server/core/reference-commands.ts): no prompt, nothing it was made with. */
function isReference(image: ImageDetails): boolean {
  return image.prompt === '' && image.seed === null && image.steps === null && image.model === null;
}

function describeImage(image: ImageDetails): string {
  if (isReference(image)) return 'Reference image';
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
  return html`data-image-view${isImageId(image.id) ? html` data-image-id="${image.id}"` : EMPTY} data-url="${image.url}" data-download="${describeDownload(image)}" data-prompt="${image.prompt}"${optional('seed', image.seed)} data-width="${image.width}" data-height="${image.height}"${optional('negative-prompt', image.negativePrompt)}${optional('steps', image.steps)}${optional('cfg', image.cfg)}${optional('sampler', image.sampler)}${optional('scheduler', image.scheduler)}${optional('model', image.model)}`;
}

/** `easel-<seed>-<first words>.png`: what the browser saves a downloaded image as. */
function describeDownload(image: ImageDetails): string {
  return nameImageDownload({ prompt: image.prompt, seed: image.seed ?? null });
}

/** Every picture can be saved under a readable name (the `download` attribute), not its random file name. */
function renderDownloadLink(image: ImageDetails): Html {
  return html`<a class="download" href="${image.url}" download="${describeDownload(image)}" title="Save as ${describeDownload(image)}">Download</a>`;
}

/** A small picture that opens the large view; its prompt shows on hover. */
export function renderThumbnail(image: ImageDetails): Html {
  if (!isImageUrl(image.url)) return EMPTY;
  return html`<span class="thumb-item"><button type="button" class="thumb" aria-haspopup="dialog" title="${image.prompt}" ${renderImageData(image)}><img src="${image.url}" alt="${describeImage(image)}" width="${image.width}" height="${image.height}" loading="lazy"></button>${renderDownloadLink(image)}${renderVaryButtons(image)}${renderCheckButton(image)}</span>`;
}

/** The newest picture, filling the image area; clicking it opens the same large view as a thumbnail. */
export function renderImage(image: ImageDetails): Html {
  if (!isImageUrl(image.url)) return renderNoImage();
  const seed = image.seed === undefined || image.seed === null ? EMPTY : html`Seed ${image.seed} · `;
  const model = image.model ? html` · ${image.model}` : EMPTY;
  return html`<button type="button" class="current" aria-haspopup="dialog" title="${image.prompt}" ${renderImageData(image)}><img class="current-image" src="${image.url}" alt="${describeImage(image)}" width="${image.width}" height="${image.height}"></button>
<p class="image-caption">${seed}${image.width} × ${image.height}${model} · ${renderDownloadLink(image)}</p>`;
}

export function renderNoImage(): Html {
  return html`<p class="placeholder">No image yet.</p>`;
}

/**
 * A picture made with the Generate button, shown in the chat where it was made. Its label is short ("Made with
 * Generate", the button's name: not the assistant's image; the prompt under it says what from), and a run of
 * such entries shows it once: web/easel.css hides it from sight on each entry right after another (not from a
 * screen reader, so every entry still says what it is). The same live and after a reload, with no state.
 */
export function renderGeneratedEntry(images: ImageDetails | readonly ImageDetails[], batchId?: string): Html {
  const shown = (Array.isArray(images) ? images : [images]).filter((image) => isImageUrl(image.url));
  const first = shown[0];
  if (first === undefined) return EMPTY;
  // A batch's entry has ids, so its later images join it as they come (render-event.ts).
  const ids = batchId !== undefined && isImageId(batchId) ? describeBatchEntry(batchId) : undefined;
  return html`<article class="msg generated${isReference(first) ? ' reference' : ''}"${ids ? html` id="${ids.entry}"` : EMPTY}>
${isReference(first) ? html`<p class="generated-label"><span class="visually-hidden">You: </span>Reference image</p>` : html`<p class="generated-label"><span class="visually-hidden">Easel: </span>Made with Generate</p>
<p class="generated-prompt">${first.prompt}</p>`}
<div class="thumbs"${ids ? html` id="${ids.thumbs}"` : EMPTY}>${shown.map(renderThumbnail)}</div>${renderCritiques(shown)}
</article>`;
}

/** The ids of a batch's entry in the chat (its generation's id): the article, and its thumbnails' row. */
export function describeBatchEntry(generationId: string): { entry: string; thumbs: string } {
  return { entry: `batch-${generationId}`, thumbs: `batch-${generationId}-thumbs` };
}

/** The ids of a comparison's entry in the chat (its generation's id): the article, and each side's thumbnails' row. */
export function describeCompareEntry(generationId: string): { entry: string; thumbs: (side: CompareSide) => string } {
  return { entry: `compare-${generationId}`, thumbs: (side) => `compare-${generationId}-${side}-thumbs` };
}

/**
 * A comparison (Compare): two columns, A and B, each with its prompt, the words the other lacks marked, its images
 * (those made so far; the rest join as they come) and "This one", which makes it the prompt and tells the model.
 * The same live, in every page and after a reload.
 */
export function renderCompareEntry(conversationId: string, generationId: string, versions: Record<CompareSide, CompareVersion>, images: Partial<Record<CompareSide, readonly ImageDetails[]>> = {}): Html {
  if (!isImageId(generationId)) return EMPTY;
  const ids = describeCompareEntry(generationId);
  const { a, b } = versions;
  const diff = diffPrompts(a.prompt, b.prompt);
  // A version changed from the other is the later one: what "Compare with previous" makes.
  const ordered = a.promptVersion < b.promptVersion;
  const column = (side: CompareSide, view: CompareVersion, other: CompareVersion, parts: readonly DiffPart[]) => {
    const label = side === 'a' ? (ordered ? 'A: the earlier prompt' : 'A') : ordered ? 'B: the later prompt' : 'B';
    const vals = JSON.stringify({ promptVersion: String(view.promptVersion), over: String(other.promptVersion) });
    return html`<div class="compare-side" data-side="${side}">
<p class="compare-label">${label}</p>
<p class="compare-prompt">${joinHtml(parts.map((part) => (part.changed ? html`<mark>${part.text}</mark>` : html`${part.text}`)))}</p>
<div class="thumbs" id="${ids.thumbs(side)}">${(images[side] ?? []).map(renderThumbnail)}</div>${renderCritiques(images[side] ?? [])}
<button type="button" class="compare-pick" hx-post="${conversationPath(conversationId, '/compare/pick')}" hx-vals="${vals}" hx-include="#prompt" hx-swap="none" title="Make this the prompt, and tell the assistant it won">This one</button>
</div>`;
  };
  return html`<article class="msg generated compare" id="${ids.entry}">
<p class="generated-label"><span class="visually-hidden">Easel: </span>Compared on the same seeds</p>
<div class="compare-columns">${column('a', a, b, diff.a)}${column('b', b, a, diff.b)}</div>
</article>`;
}
