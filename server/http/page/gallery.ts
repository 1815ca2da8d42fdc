// The gallery page: every picture made, newest first, as a grid of thumbnails; a search of the prompts, the
// conversation and the checkpoint to narrow it to, "More" for the next page; and the large view (a native
// <dialog> filled by web/js/gallery.js from the clicked thumbnail's data attributes, with textContent).
import { GALLERY_DEFAULT_LIMIT, nameImageDownload, thumbnailSize, thumbnailUrl, type GalleryFilters, type GalleryPage, type GalleryQuery, type ImageRecord } from '../../core/index.ts';
import { conversationPath, VARY_CHOICES } from './bubbles.ts';
import { EMPTY, html, joinHtml, renderPartial, type Html } from './markup.ts';
import { renderDocument } from './views.ts';

export interface GalleryModel {
  page: GalleryPage & { query: GalleryQuery };
  /**
   * The page's script modules (web/js), asked for first: the grid's thumbnails must not hold every connection while
   * the script that opens the large view still waits for its imports.
   */
  modules?: readonly string[];
  filters: GalleryFilters;
  /** A search or filter that was refused: said where the pictures would be. */
  refusal?: string;
}

/** The address of the gallery as searched and narrowed: the page's own, kept in the address bar. */
export function galleryPath(query: Pick<GalleryQuery, 'q' | 'conversationId' | 'checkpoint'>): string {
  const params = new URLSearchParams();
  if (query.q.trim() !== '') params.set('q', query.q);
  if (query.conversationId) params.set('conversationId', query.conversationId);
  if (query.checkpoint) params.set('checkpoint', query.checkpoint);
  const search = params.toString();
  return search === '' ? '/gallery' : `/gallery?${search}`;
}

/** The next page's address: the same search and filters, after the last picture shown. */
function morePath(query: GalleryQuery, next: string): string {
  const params = new URLSearchParams(galleryPath(query).split('?')[1] ?? '');
  if (query.limit !== GALLERY_DEFAULT_LIMIT) params.set('limit', String(query.limit));
  params.set('before', next);
  return `/gallery/images?${params.toString()}`;
}

export function renderGalleryPage(model: GalleryModel): Html {
  const { query } = model.page;
  return renderDocument(
    'Gallery · Easel',
    html`<body class="gallery-body">
<a href="#gallery-results" class="skip-link">Skip to the pictures</a>
<header class="topbar">
<h1 class="brand"><img src="/assets/favicon.svg" alt="" width="22" height="22"> Easel</h1>
<nav class="topbar-nav" aria-label="Easel"><a href="/" class="button quiet">Conversations</a><a href="/gallery" class="button quiet" aria-current="page">Gallery</a></nav>
</header>
<main id="gallery" class="gallery" aria-labelledby="gallery-heading">
<div class="gallery-head">
<h2 id="gallery-heading">Gallery</h2>
${renderGalleryFilters(query, model.filters)}
</div>
<div id="gallery-results" class="gallery-results" tabindex="-1">
${renderGalleryResults(model)}
</div>
</main>
${renderGalleryDialog()}
</body>`,
    joinHtml((model.modules ?? []).map((name) => html`<link rel="modulepreload" href="/assets/${name}">
`)),
  );
}

/** The search box and the two selects: each change asks for the grid again (htmx), and the address follows. */
function renderGalleryFilters(query: GalleryQuery, filters: GalleryFilters): Html {
  const option = (value: string, label: string, selected: boolean) => html`<option value="${value}"${selected ? html` selected` : EMPTY}>${label}</option>`;
  // A filter the lists do not hold (an old link) stays shown, so the page says what it shows.
  const conversations = filters.conversations.map((conversation) => ({ value: conversation.id, label: conversation.title }));
  if (query.conversationId && !conversations.some((entry) => entry.value === query.conversationId)) conversations.push({ value: query.conversationId, label: 'A conversation without images' });
  const checkpoints = [...filters.checkpoints];
  if (query.checkpoint && !checkpoints.includes(query.checkpoint)) checkpoints.push(query.checkpoint);
  return html`<form id="gallery-filters" class="gallery-filters" role="search" action="/gallery" method="get" hx-get="/gallery/images" hx-trigger="submit, input changed delay:300ms target:#gallery-search, change target:select" hx-target="#gallery-results" hx-swap="innerHTML" hx-sync="this:replace">
<div class="gallery-field gallery-field-search"><label for="gallery-search">Search prompts</label><input type="search" id="gallery-search" name="q" value="${query.q}" placeholder="Words in the prompt" autocomplete="off" maxlength="500"></div>
<div class="gallery-field"><label for="gallery-conversation">Conversation</label><select id="gallery-conversation" name="conversationId">${option('', 'All conversations', !query.conversationId)}${joinHtml(conversations.map((entry) => option(entry.value, entry.label, entry.value === query.conversationId)))}</select></div>
<div class="gallery-field"><label for="gallery-checkpoint">Checkpoint</label><select id="gallery-checkpoint" name="checkpoint">${option('', 'All checkpoints', !query.checkpoint)}${joinHtml(checkpoints.map((name) => option(name, name, name === query.checkpoint)))}</select></div>
</form>`;
}

/** What the filters found: a word when nothing, the grid, and "More" when there is a next page. */
export function renderGalleryResults(model: GalleryModel): Html {
  const { images, next, query } = model.page;
  const narrowed = query.q.trim() !== '' || query.conversationId !== undefined || query.checkpoint !== undefined;
  const status =
    model.refusal !== undefined
      ? html`<span class="gallery-refusal">${model.refusal}</span>`
      : images.length > 0
        ? EMPTY
        : narrowed
          ? html`No picture matches: try other words, or all conversations and checkpoints.`
          : html`No pictures yet: the images you make in your conversations appear here.`;
  const titles = titlesOf(model.filters);
  return html`<p id="gallery-status" class="gallery-status" role="status">${status}</p>
<ul id="gallery-grid" class="gallery-grid" aria-label="Pictures, newest first">${joinHtml(images.map((image) => renderGalleryItem(image, titles.get(image.conversationId))))}</ul>
${renderMore(query, next)}`;
}

/** The answer to "More": the next pictures added to the grid, and the button again when there are still more. */
export function renderGalleryMore(model: GalleryModel): Html {
  const titles = titlesOf(model.filters);
  return joinHtml([
    renderPartial('#gallery-grid', 'beforeend', joinHtml(model.page.images.map((image) => renderGalleryItem(image, titles.get(image.conversationId))))),
    renderPartial('#gallery-more', 'outerHTML', renderMore(model.page.query, model.page.next)),
  ]);
}

function renderMore(query: GalleryQuery, next: string | null): Html {
  if (next === null) return html`<div id="gallery-more" hidden></div>`;
  return html`<div id="gallery-more" class="gallery-more"><button type="button" id="gallery-more-button" hx-get="${morePath(query, next)}" hx-swap="none" hx-disable="this">More</button></div>`;
}

function titlesOf(filters: GalleryFilters): Map<string, string> {
  return new Map(filters.conversations.map((conversation) => [conversation.id, conversation.title]));
}

const ALT_PROMPT_CHARS = 120;

/**
 * One picture of the grid: its thumbnail, sized by its attributes before it loads (nothing moves), loaded when it
 * comes near the screen. What the large view shows travels as data attributes, escaped like any attribute.
 */
export function renderGalleryItem(image: ImageRecord, conversationTitle: string | undefined): Html {
  const size = thumbnailSize(image.width, image.height);
  const optional = (name: string, value: string | number | null | undefined) => (value === undefined || value === null ? EMPTY : html` data-${name}="${value}"`);
  const alt = `Image: ${image.prompt.length > ALT_PROMPT_CHARS ? `${image.prompt.slice(0, ALT_PROMPT_CHARS)}…` : image.prompt}`;
  return html`<li class="gallery-item" id="gallery-item-${image.id}"><button type="button" class="gallery-thumb" aria-haspopup="dialog" title="${image.prompt}" data-gallery-image data-id="${image.id}" data-conversation-id="${image.conversationId}" data-conversation-path="${conversationPath(image.conversationId)}"${optional('conversation-title', conversationTitle)} data-url="${image.url}" data-download="${nameImageDownload({ prompt: image.prompt, seed: image.seed })}" data-prompt="${image.prompt}" data-negative-prompt="${image.negativePrompt}" data-width="${image.width}" data-height="${image.height}"${optional('seed', image.seed)}${optional('steps', image.steps)}${optional('cfg', image.cfg)}${optional('sampler', image.sampler)}${optional('scheduler', image.scheduler)}${optional('model', image.model)}${optional('source-strength', image.source?.strength)} data-created-at="${image.createdAt}"><img src="${thumbnailUrl(image.id)}" alt="${alt}" width="${size.width}" height="${size.height}" loading="lazy" decoding="async"></button></li>`;
}

/**
 * The large view: the picture, its prompt and settings, Previous and Next (and the arrow keys), and what can be
 * done with it. web/js/gallery.js fills it with textContent and checked URLs.
 */
function renderGalleryDialog(): Html {
  const row = (id: string, label: string, value: Html = EMPTY) => html`<div class="setting-row"><dt>${label}</dt><dd id="gallery-dialog-${id}">${value}</dd></div>`;
  return html`<dialog id="gallery-dialog" class="image-dialog gallery-dialog" aria-labelledby="gallery-dialog-title">
<div class="dialog-inner">
<div class="dialog-head"><h2 id="gallery-dialog-title">Picture</h2><p id="gallery-dialog-position" class="hint"></p><button type="button" id="gallery-dialog-close" class="quiet">Close</button></div>
<div class="dialog-body">
<div class="gallery-stage">
<a id="gallery-dialog-link" class="dialog-image" target="_blank" rel="noopener" title="Open the PNG in a new tab"><img id="gallery-dialog-img" alt=""></a>
<div class="gallery-steps"><button type="button" id="gallery-prev" aria-keyshortcuts="ArrowLeft">← Previous</button><button type="button" id="gallery-next" aria-keyshortcuts="ArrowRight">Next →</button></div>
</div>
<dl class="image-settings">
${row('prompt', 'Prompt')}
${row('seed', 'Seed')}
${row('sampler', 'Sampler')}
${row('model', 'Checkpoint')}
${row('size', 'Size')}
${row('source', 'Made from')}
${row('conversation', 'Conversation', html`<a id="gallery-dialog-conversation-link" href="/"></a>`)}
</dl>
</div>
<div class="row dialog-actions">
<a id="gallery-open" class="button" href="/">Open its conversation</a>
<button type="button" id="gallery-remix" class="primary" aria-describedby="gallery-actions-help">Remix</button>
${VARY_CHOICES.map((choice, index) => html`<button type="button" id="gallery-vary-${index === 0 ? 'subtle' : 'strong'}" data-strength="${choice.strength}" aria-describedby="gallery-actions-help">${choice.label}</button>`)}
<button type="button" id="gallery-use-prompt" aria-describedby="gallery-actions-help">Use prompt</button>
<a id="gallery-download" class="button" download>Download</a>
<button type="button" id="gallery-delete" class="quiet danger">Delete</button>
</div>
<p id="gallery-dialog-status" class="gallery-dialog-status" role="status"></p>
<p id="gallery-actions-help" class="hint">Remix makes a new picture in its conversation from this prompt and settings with a new random seed, then opens it; Vary does the same starting from this picture; Use prompt puts this prompt in its conversation's prompt pane and opens it.</p>
</div>
</dialog>`;
}
