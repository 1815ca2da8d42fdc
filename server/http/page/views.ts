import type { CompareSide, CompareVersion, ConversationView, Health, ImageInProgress, ImageRecord, PaneView, Settings, TranscriptTurn } from '../../core/index.ts';
import { decideTurnOffers, describeModelHealth, isPinnableField, MAX_IMAGE_COUNT, MAX_MESSAGE_CHARS, SETTING_LIMITS } from '../../core/index.ts';
import {
  conversationPath,
  renderAssistantBubble,
  renderCompareEntry,
  renderRegenerateButton,
  renderRegenerateForm,
  renderResendForm,
  renderSendAgain,
  renderDivider,
  renderErrorBox,
  renderGeneratedEntry,
  renderImage,
  renderImageNote,
  renderNoImage,
  renderNotice,
  renderUserBubble,
  VARY_CHOICES,
  type CritiqueDetails,
  type ImageDetails,
} from './bubbles.ts';
import { renderFamilyHint, renderModelsSection, renderPullForm, renderSizePresetOptions } from './models-view.ts';
import { renderFieldMeta, renderPromptHistory, renderSuggestion } from './pane.ts';
import { CHOICE_FIELDS } from './settings-form.ts';
import { renderGenerationBlock } from './render-event.ts';
import { renderChatHead, renderConversationItems, renderCurrentMarker, renderLibrary, type LibraryState } from './library.ts';
import { EMPTY, html, joinHtml, renderMessage, renderPartial, type Html } from './markup.ts';

export interface ImageStatus {
  configured: boolean;
  detail: string;
  /** Whether the image server can start from an image (Vary): true, or why not; absent while unknown. */
  canVary?: true | string;
}

/** What the Vary buttons say about themselves: what they do, or why the image server cannot (vary.js reads it). */
export function describeVary(images: ImageStatus): { ready: boolean; text: string } {
  if (!images.configured) return { ready: false, text: 'Vary needs an image server, as Generate does.' };
  if (typeof images.canVary === 'string') return { ready: false, text: images.canVary };
  return { ready: true, text: 'Vary makes a new image from the prompt and settings shown, starting from this one: subtle keeps most of it, strong changes more.' };
}

/** Settings the user edits in the panel, in the order they are shown. */
export const SETTINGS_FIELDS = ['steps', 'cfg', 'seed', 'width', 'height', 'negativePrompt', 'autoGenerate', 'autoCheck', 'autoRefine'] as const;
export type SettingsField = (typeof SETTINGS_FIELDS)[number];

/** Every field a settings answer can mark, in the order the panel shows them: the models first. */
const ERROR_SLOTS = [...CHOICE_FIELDS, ...SETTINGS_FIELDS] as const;

export function renderDocument(title: string, body: Html, head: Html = EMPTY): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="htmx-config" content='{"includeIndicatorCSS": false, "history": "reload", "extensions": "sse"}'>
<title>${title}</title>
<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/assets/easel.css">
<!-- Not deferred: htmx starts on DOMContentLoaded only when it loads while the page is still parsed, so the SSE
extension is registered before it processes #live (deferred, htmx could start in between and #live never connect). -->
<script src="/assets/htmx.min.js"></script>
<script src="/assets/hx-sse.min.js"></script>
${head}<script type="module" src="/assets/easel.js"></script>
</head>
${body}
</html>`;
}

export interface PageModel {
  conversation: ConversationView;
  /** The empty page of a conversation that does not exist yet: its first message (or Generate) creates it. */
  isNew: boolean;
  /** A reply is being written right now (in another tab): its turn shows as still running. */
  busy: boolean;
  library: LibraryState;
  imageStatus: ImageStatus;
  /**
   * The live view: the feed id this page's content stands for (its stream resumes after it) and this page's
   * own id (the turns and images it asked for come on its own requests, not twice). Absent on the empty page.
   */
  live?: { snapshotId: string; viewId: string };
}

/** The whole page: the top bar, the library and the conversation. */
export function renderConversationPage(model: PageModel): Html {
  return renderDocument(
    documentTitle(model.conversation.title),
    html`<body>
${renderSkipLink()}
<header class="topbar">
<button type="button" id="library-toggle" class="library-toggle" aria-controls="library" aria-expanded="false">Conversations</button>
<h1 class="brand"><img src="/assets/favicon.svg" alt="" width="22" height="22"> Easel</h1>
<div id="status" class="status" role="status" hx-get="/status" hx-trigger="load, every 30s, easel:status from:body" hx-include="#setting-chatModel" hx-swap="innerMorph">Checking Ollama…</div>
</header>
<div class="app">
${renderLibrary(model.library)}
${renderConversationPart(model)}
</div>
<div id="composer-inbox" hidden></div>
${renderImageDialog()}
</body>`,
  );
}

/**
 * The page's first stop for the keyboard and a screen reader's first link, shown only when focused: past the top
 * bar and the library (up to 50 conversations; on a narrow window the image and prompt panes come first) to the
 * chat's log, which takes the focus (tabindex 0, named "Conversation"); the composer is the next stop after its
 * messages. A plain fragment link: it works before any script. (A desktop opens with the focus in the composer.)
 */
function renderSkipLink(): Html {
  return html`<a href="#log" class="skip-link">Skip to the conversation</a>`;
}

export function documentTitle(title: string): string {
  return `${title} · Easel`;
}

/** The conversation's part of the page, swapped whole when switching to another conversation. */
export function renderConversationPart(model: PageModel): Html {
  const { conversation, isNew } = model;
  const id = conversation.id;
  const latestImage = conversation.images.at(-1);
  const empty = conversation.turns.length === 0 && conversation.images.length === 0 && conversation.generating.every((image) => image.compare === undefined);
  return html`<main id="conversation" class="layout" data-conversation-id="${id}">
<section class="chat" aria-label="Chat">
${renderChatHead({ id, title: conversation.title, isNew, imageCount: conversation.images.length })}
<div id="log" class="log" role="log" aria-live="polite" aria-label="Conversation" tabindex="0">
${empty ? html`<p id="log-empty" class="log-empty">Describe the picture you have in mind. Easel asks what it needs to know and writes the prompt on the right.</p>` : renderTranscript(id, conversation.turns, conversation.images, model.busy, conversation.generating, conversation.checks)}
</div>
<form id="composer" class="composer" hx-post="${conversationPath(id, '/messages')}" hx-swap="none" hx-disable="#send" data-stream novalidate>
${isNew ? html`<input type="hidden" id="start-new" name="startNew" value="1">` : EMPTY}
<input type="hidden" id="replace-last" name="replaceLast" value="1" disabled>
<label for="message" class="visually-hidden">Message</label>
<textarea id="message" name="text" rows="3" data-max-chars="${MAX_MESSAGE_CHARS}" placeholder="Describe the picture you want…  (Enter sends, Shift+Enter adds a line)" aria-describedby="composer-status"></textarea>
<div class="composer-actions">
<button type="button" id="prompt-cue" class="prompt-cue" aria-controls="prompt" hidden>Prompt updated ↑</button>
<p id="composer-status" class="composer-status" aria-live="polite"></p>
<button type="button" id="stop" class="stop" hx-post="${conversationPath(id, '/stop')}" hx-swap="none">Stop</button>
<button type="submit" id="send" class="send primary">Send</button>
</div>
</form>
${renderRegenerateForm(id)}
${renderResendForm(id)}
</section>
<div class="side">
<div class="side-top">
<section class="panel image-pane" aria-labelledby="image-heading">
<h2 id="image-heading">Image</h2>
<div id="image-frame" class="image-frame">${latestImage ? renderImage(latestImage) : renderNoImage()}</div>
<div id="image-status" class="image-status">${renderRunningImages(id, conversation)}</div>
<div id="image-error" class="image-error-slot"></div>
${renderReferenceForm(id)}
<p id="image-announce" class="visually-hidden" aria-live="polite"></p>
</section>
${renderPromptPane(id, conversation.prompt, model.imageStatus, conversation.pane)}
</div>
${renderSettingsPanel(id, conversation.settings, conversation.pane)}
</div>
<div id="pane-inbox" hidden></div>
<p id="drop-hint" class="drop-hint" data-reference="Drop the picture to add it as a reference image" data-describe="Drop the picture on the prompt: its description becomes the prompt" hidden>Drop the picture to add it as a reference image</p>
${model.live ? renderLiveStream(id, model.live, conversation.pane.paneRevision) : html`<div id="live" hidden hx-sse:connect="/library/events" hx-swap="none"></div>`}
</main>`;
}

/**
 * A reference image, the starting point for Vary: chosen here (the keyboard's way), or dropped or pasted anywhere
 * on the page (web/js/reference.js puts that file in this form). It lands in the chat with its Vary buttons.
 */
function renderReferenceForm(conversationId: string): Html {
  // On the empty page the picture starts the conversation (#start-new goes with it, as with a first message).
  return html`<form id="reference-form" class="reference-form" hx-post="${conversationPath(conversationId, '/references')}" hx-encoding="multipart/form-data" hx-include="#start-new" hx-swap="none" hx-disable="#reference-button">
<label id="reference-button" class="button quiet reference-button">Add a reference image…<input type="file" id="reference-file" name="file" accept="image/png,image/jpeg,image/webp" class="visually-hidden"></label>
<span class="hint">or drop or paste a picture</span>
</form>`;
}

/**
 * The images still being made (a reload, a switch back, a second tab): their progress and Cancel, each following
 * its image until it lands in its reply, or in the chat for Generate's.
 */
function renderRunningImages(conversationId: string, conversation: ConversationView): Html {
  return joinHtml(
    conversation.generating.map((image) => {
      // Its pictures shown already: those stored with its first one (a batch's share their moment, generation.ts).
      const first = conversation.images.find((stored) => stored.id === image.id);
      const skip = first === undefined ? [] : conversation.images.filter((stored) => stored.createdAt === first.createdAt && stored.conversationId === first.conversationId).map((stored) => stored.id);
      return renderGenerationBlock(conversationId, image, image.turnId === null ? { skip } : { bubbleId: `turn-${image.turnId}`, skip });
    }),
  );
}

/**
 * The page's live view of the conversation: a stream of every change from any tab or client, from the point
 * this page shows on (it reconnects by itself, resuming with Last-Event-ID). `data-view` goes with each request.
 */
export function renderLiveStream(conversationId: string, live: { snapshotId: string; viewId: string }, paneRevision: number): Html {
  const url = `${conversationPath(conversationId, '/events')}?after=${encodeURIComponent(live.snapshotId)}&view=${encodeURIComponent(live.viewId)}`;
  return html`<div id="live" hidden data-view="${live.viewId}" data-revision="${paneRevision}" hx-sse:connect="${url}" hx-sse:close="easel:closed" hx-swap="none"></div>`;
}

/** The answer to an htmx switch: the conversation's part, its title, and the list with it marked. */
export function renderConversationSwitch(model: PageModel): Html {
  return joinHtml([
    html`<title>${documentTitle(model.conversation.title)}</title>`,
    renderConversationPart(model),
    renderPartial('#conversation-list', 'innerMorph', renderConversationItems(model.library)),
    renderPartial('#current-conversation', 'outerHTML', renderCurrentMarker(model.library.currentId)),
  ]);
}

function renderPromptPane(id: string, prompt: string, imageStatus: ImageStatus, pane: PaneView): Html {
  const canGenerate = imageStatus.configured;
  return html`<section class="panel prompt-pane" aria-labelledby="prompt-heading">
<h2 id="prompt-heading" tabindex="-1">Prompt</h2>
<form id="prompt-form" novalidate>
<label for="prompt" class="visually-hidden">Prompt</label>
<textarea id="prompt" name="prompt" rows="5" data-max-chars="${SETTING_LIMITS.promptMaxChars}" placeholder="The image prompt appears here once the assistant has one. You can edit it at any time." hx-put="${conversationPath(id, '/prompt')}" hx-trigger="input changed delay:700ms, easel:save" hx-swap="none" aria-describedby="prompt-error prompt-count" data-version="${pane.promptVersion ?? ''}">${prompt}</textarea>
<p id="prompt-error" class="field-error" aria-live="polite"></p>
${renderPromptCount(pane.family)}
</form>
${renderDescribeForm(id)}
${renderSuggestion(id, pane)}
<div class="row prompt-actions">
${renderPromptHistory(id, pane)}
<button type="button" id="copy-prompt">Copy</button>
<form id="generate-form" hx-post="${conversationPath(id, '/generations')}" hx-include="#prompt, #settings-form" hx-swap="none" hx-disable="#generate, button.vary, button.fix-image" data-one-shot novalidate>
${renderGenerateButton(canGenerate, prompt.trim() === '', imageStatus.canVary)}
<label for="generate-count" class="generate-count">Count <input id="generate-count" name="count" type="number" min="1" max="${MAX_IMAGE_COUNT}" step="1" value="1" inputmode="numeric" aria-describedby="generate-count-help"></label>
<span id="generate-count-help" class="visually-hidden">How many images Generate and Vary make at once, 1 to ${MAX_IMAGE_COUNT}: seeds one after another from the seed set below (a random one when it is −1).</span>
</form>
<span id="prompt-saved" class="hint" aria-live="polite"></span>
</div>
<p id="generate-help" class="hint">${canGenerate ? 'Generate makes an image from this prompt and the settings below.' : renderMessage(imageStatus.detail)}</p>
${renderVaryHelp(imageStatus)}
<p id="generate-empty" class="hint"${prompt.trim() === '' ? EMPTY : html` hidden`}>Generate needs a prompt: write one, or chat until the assistant suggests one.</p>
<p id="prompt-announce" class="visually-hidden" aria-live="polite"></p>
</section>`;
}

/**
 * Describe: a picture dropped or pasted on the prompt (web/js/describe.js puts that file here), or chosen here (the
 * keyboard's way), is described by the vision model, and its description becomes the prompt, one undo away. The
 * prompt on screen goes with it, saved first. On the chat, a dropped picture stays a reference image.
 */
function renderDescribeForm(conversationId: string): Html {
  return html`<form id="describe-form" class="describe-form" hx-post="${conversationPath(conversationId, '/describe')}" hx-encoding="multipart/form-data" hx-include="#prompt, #start-new, #settings-form" hx-swap="none" hx-disable="#describe-button">
<label id="describe-button" class="button quiet describe-button">Describe a picture…<input type="file" id="describe-file" name="file" accept="image/png,image/jpeg,image/webp" class="visually-hidden"></label>
<span class="hint">or drop or paste one on the prompt: its description becomes the prompt</span>
</form>
<p id="describe-status" class="hint describe-status" aria-live="polite"></p>`;
}

/**
 * The prompt's length and an estimate of its tokens, filled by web/js/prompt-count.js as the prompt changes:
 * the family's encoder reads so many (CLIP about 75, T5 a few hundred), and the count turns amber past them.
 * A pane update sets these again when the family changes (web/js/pane.js).
 */
function renderPromptCount(family: PaneView['family']): Html {
  return html`<p id="prompt-count" class="hint prompt-count" data-token-limit="${family.tokenBudget}" data-encoder="${family.encoder}"></p>`;
}

/**
 * Generate is usable when a backend is configured (the status line refreshes that) and the prompt is not
 * empty (web/easel.js follows the typing); \`data-backend-ready\` keeps the first apart from the second.
 */
export function renderGenerateButton(backendReady: boolean, promptEmpty: boolean, canVary?: true | string): Html {
  const vary = describeVary({ configured: backendReady, detail: '', ...(canVary === undefined ? {} : { canVary }) }).ready;
  return html`<button type="submit" id="generate" class="primary" aria-describedby="generate-help generate-empty" data-backend-ready="${backendReady ? 'yes' : 'no'}" data-vary="${vary ? 'yes' : 'no'}"${backendReady && !promptEmpty ? EMPTY : html` disabled`}>Generate</button>`;
}

/** The Vary buttons' description (their aria-describedby): what they do, or why this image server cannot. */
export function renderVaryHelp(images: ImageStatus): Html {
  return html`<p id="vary-help" class="visually-hidden">${describeVary(images).text}</p>`;
}

/** "Correct it up to": how many corrected pictures one check may lead to (autoRefine), 0 to 3. */
const REFINE_CHOICES = ['never', 'once', 'twice', '3 times'] as const;

function renderSettingsPanel(id: string, settings: Settings, pane: PaneView): Html {
  // A setting the model proposes shows whether the user pinned it, and the model's different value.
  const meta = (name: SettingsField) => (isPinnableField(name) ? renderFieldMeta(id, name, pane) : EMPTY);
  const field = (name: SettingsField, label: string, input: Html, extra: Html = EMPTY, below: Html = EMPTY) =>
    html`<div class="field field-${name}"><label for="setting-${name}">${label}</label><div class="control">${input}${extra}</div>${below}${meta(name)}<p id="error-${name}" class="field-error"></p></div>`;
  const number = (name: SettingsField, value: number, attrs: Html) =>
    html`<input id="setting-${name}" name="${name}" type="number" value="${value}" ${attrs} aria-describedby="error-${name}${name === 'cfg' ? ' family-hint-cfg' : ''}">`;
  return html`<details class="panel settings" open>
<summary><h2>Settings</h2></summary>
<form id="settings-form" hx-put="${conversationPath(id, '/settings')}" hx-trigger="change" hx-swap="none" novalidate>
${renderModelsSection(id, settings, pane.family)}
${field('steps', 'Steps', number('steps', settings.steps, html`min="${SETTING_LIMITS.steps.min}" max="${SETTING_LIMITS.steps.max}" step="1" inputmode="numeric"`))}
${field('cfg', 'CFG', number('cfg', settings.cfg, html`min="${SETTING_LIMITS.cfg.min}" max="${SETTING_LIMITS.cfg.max}" step="0.5" inputmode="decimal"`), EMPTY, renderFamilyHint('cfg', pane.family))}
${field(
  'seed',
  'Seed',
  number('seed', settings.seed, html`min="${SETTING_LIMITS.seed.min}" max="${SETTING_LIMITS.seed.max}" step="1" inputmode="numeric"`),
  html`<button type="button" id="random-seed" class="quiet" title="Set the seed to -1: a new random seed for every image">Random</button>`,
)}
<div class="field field-size"><label for="size-preset">Size</label><div class="control"><select id="size-preset" name="sizePreset">${renderSizePresetOptions(pane.family, settings.width, settings.height)}</select></div></div>
${field('width', 'Width', number('width', settings.width, html`min="${SETTING_LIMITS.size.min}" max="${SETTING_LIMITS.size.max}" step="${SETTING_LIMITS.size.multipleOf}" inputmode="numeric"`))}
${field('height', 'Height', number('height', settings.height, html`min="${SETTING_LIMITS.size.min}" max="${SETTING_LIMITS.size.max}" step="${SETTING_LIMITS.size.multipleOf}" inputmode="numeric"`))}
${field(
  'negativePrompt',
  'Negative prompt',
  html`<textarea id="setting-negativePrompt" name="negativePrompt" rows="2" aria-describedby="error-negativePrompt family-hint-negativePrompt">${settings.negativePrompt}</textarea>`,
  EMPTY,
  renderFamilyHint('negativePrompt', pane.family),
)}
<div class="field field-autoGenerate"><div class="control"><input id="setting-autoGenerate" name="autoGenerate" type="checkbox"${settings.autoGenerate ? html` checked` : EMPTY} aria-describedby="error-autoGenerate"><label for="setting-autoGenerate">Generate automatically when the assistant is ready</label></div><p id="error-autoGenerate" class="field-error"></p></div>
<div class="field field-autoCheck"><div class="control"><input id="setting-autoCheck" name="autoCheck" type="checkbox"${settings.autoCheck ? html` checked` : EMPTY} aria-describedby="error-autoCheck auto-check-hint"><label for="setting-autoCheck">Check each new picture</label></div><p id="error-autoCheck" class="field-error"></p></div>
${field(
  'autoRefine',
  'Correct it up to',
  html`<select id="setting-autoRefine" name="autoRefine" aria-describedby="error-autoRefine auto-check-hint">${REFINE_CHOICES.map((label, rounds) => html`<option value="${rounds}"${settings.autoRefine === rounds ? html` selected` : EMPTY}>${label}</option>`)}</select>`,
  EMPTY,
  html`<p id="auto-check-hint" class="hint">The vision model (Settings → Models) looks at each new picture; one that misses something is made again on its seed from its revised prompt.</p>`,
)}
<p id="settings-status" class="hint" aria-live="polite"></p>
</form>
${renderPullForm(id)}
</details>`;
}

/**
 * The large view of an image: an empty native dialog that web/easel.js fills from the clicked
 * picture's data attributes (with textContent) and opens with showModal().
 */
function renderImageDialog(): Html {
  const row = (id: string, label: string) => html`<div class="setting-row"><dt>${label}</dt><dd id="image-dialog-${id}"></dd></div>`;
  return html`<dialog id="image-dialog" class="image-dialog" aria-labelledby="image-dialog-title">
<div class="dialog-inner">
<div class="dialog-head"><h2 id="image-dialog-title">Image and its settings</h2><button type="button" id="image-dialog-close" class="quiet">Close</button></div>
<div class="dialog-body">
<a id="image-dialog-link" class="dialog-image" target="_blank" rel="noopener" title="Open the PNG in a new tab"><img id="image-dialog-img" alt=""></a>
<dl class="image-settings">
${row('prompt', 'Prompt')}
${row('negative-prompt', 'Negative prompt')}
${row('steps', 'Steps')}
${row('cfg', 'CFG')}
${row('seed', 'Seed')}
${row('size', 'Size')}
${row('model', 'Model')}
</dl>
</div>
<div class="row dialog-actions">
<button type="button" id="use-settings" class="primary" aria-describedby="use-settings-help">Use these settings</button>
<button type="button" id="reuse-seed">Reuse seed</button>
${VARY_CHOICES.map((choice, index) => html`<button type="submit" form="generate-form" name="from" value="" id="dialog-vary-${index === 0 ? 'subtle' : 'strong'}" class="vary" data-strength="${choice.strength}" aria-describedby="vary-help">${choice.label}</button>`)}
<a id="image-dialog-download" class="button" download>Download</a>
</div>
<p id="use-settings-help" class="hint">“Use these settings” puts this prompt in the prompt pane and its steps, CFG, seed, size and negative prompt in the settings; “Reuse seed” takes only the seed. Both are saved, and the assistant hears of them with your next message.</p>
</div>
</dialog>`;
}

/**
 * The turns, with each Generate-button image placed where it was made (by time): the same order the
 * live page showed, after a reload.
 */
export function renderTranscript(
  conversationId: string,
  turns: readonly TranscriptTurn[],
  images: readonly ImageRecord[],
  busy: boolean,
  generating: readonly ImageInProgress[] = [],
  checks: readonly ImageCheck[] = [],
): Html {
  const withCritique = critiquesOf(checks);
  images = images.map(withCritique);
  turns = turns.map((turn) => withCritiquesOfTurn(turn, withCritique));
  // Stryker disable next-line MethodExpression,ConditionalExpression: a replaced turn is always followed by the turns that replaced it, never the last of its role
  const shown = turns.filter((turn) => turn.status !== 'replaced');
  const lastUser = shown.findLast((turn) => turn.role === 'user');
  // Stryker disable next-line ConditionalExpression: a message and its reply are stored in one transaction, so the last turn is always a reply
  const lastAssistant = shown.findLast((turn) => turn.role === 'assistant');
  const loose = images.filter((image) => image.turnId === null);
  let next = 0;
  const takeLooseBefore = (at: string | undefined): Html[] => {
    const taken: Html[] = [];
    // Stryker disable next-line EqualityOperator: loose[length] is undefined, and the loop stops on it
    while (next < loose.length) {
      const image = loose[next];
      if (!image || (at !== undefined && image.createdAt >= at)) break;
      // A batch's images share their moment (generation.ts): one entry, as the live page showed them.
      const batch = [image];
      while (next + batch.length < loose.length && loose[next + batch.length]?.createdAt === image.createdAt) batch.push(loose[next + batch.length] as ImageRecord);
      taken.push(image.compareSide === null ? renderGeneratedEntry(batch, batch.length > 1 ? image.id : undefined) : renderStoredComparison(conversationId, batch, generating));
      next += batch.length;
    }
    return taken;
  };
  const parts = turns.map((turn, index) => {
    const before = joinHtml(takeLooseBefore(turn.createdAt));
    const last = !busy && (turn === lastUser || turn === lastAssistant);
    return joinHtml([before, renderTurn(conversationId, turns, turn, index, last)]);
  });
  // A comparison still being made that has no picture yet: its two columns, which its pictures join.
  const starting = generating.filter((image) => image.compare !== undefined && !images.some((stored) => stored.id === image.id));
  return joinHtml([...parts, ...takeLooseBefore(undefined), ...starting.map((image) => renderCompareEntry(conversationId, image.id, image.compare as CompareVersions))]);
}

type CompareVersions = Record<CompareSide, CompareVersion>;

/**
 * A comparison's stored pictures (they share their moment, and the first has its generation's id): its two
 * columns, each version's prompt read from its pictures, or, while side B has none yet, from the running image.
 */
function renderStoredComparison(conversationId: string, images: readonly ImageRecord[], generating: readonly ImageInProgress[]): Html {
  const first = images[0] as ImageRecord;
  const bySide = { a: images.filter((image) => image.compareSide === 'a'), b: images.filter((image) => image.compareSide === 'b') };
  const running = generating.find((image) => image.id === first.id)?.compare;
  const versionOf = (side: CompareSide): CompareVersion | undefined => {
    const image = bySide[side][0];
    return image !== undefined && image.promptVersion !== null ? { promptVersion: image.promptVersion, prompt: image.prompt } : running?.[side];
  };
  const a = versionOf('a');
  const b = versionOf('b');
  // Half a comparison whose other side is not known (stopped before it, or its versions gone): one row of pictures.
  if (a === undefined || b === undefined) return renderGeneratedEntry(images, images.length > 1 ? first.id : undefined);
  return renderCompareEntry(conversationId, first.id, { a, b }, bySide);
}

/** One stored turn's bubble as a reload draws it, not the last one (a turn another tab's Edit or Regenerate replaced). */
export function renderTurnBubble(conversationId: string, turns: readonly TranscriptTurn[], turn: TranscriptTurn, checks: readonly ImageCheck[] = []): Html {
  return renderTurn(conversationId, turns, withCritiquesOfTurn(turn, critiquesOf(checks)), Math.max(0, turns.indexOf(turn)), false);
}

type ImageCheck = ConversationView['checks'][number];

/** Gives a picture its latest check, drawn under its row as the live page showed it (checks come oldest first). */
function critiquesOf(checks: readonly ImageCheck[]): <T extends ImageDetails & { id: string }>(image: T) => T {
  const critiques = new Map<string, CritiqueDetails>(checks.map((check) => [check.imageId, check]));
  return (image) => {
    const critique = critiques.get(image.id);
    return critique ? { ...image, critique } : image;
  };
}

function withCritiquesOfTurn(turn: TranscriptTurn, withCritique: ReturnType<typeof critiquesOf>): TranscriptTurn {
  const images = turn.images.map(withCritique);
  return images.some((image, index) => image !== turn.images[index]) ? { ...turn, images } : turn;
}

function renderTurn(conversationId: string, turns: readonly TranscriptTurn[], turn: TranscriptTurn, index: number, last: boolean): Html {
  const bubbleId = `turn-${turn.id}`;
  const replaced = turn.status === 'replaced';
  if (turn.role === 'user') {
    // Edit is offered by its reply's end, as live (render-event.ts): the reply after it that was not replaced.
    const reply = turns.slice(index + 1).find((later) => later.role === 'assistant' && later.status !== 'replaced');
    const edit = decideTurnOffers(reply?.status ?? turn.status, { last, stored: true }).edit;
    return renderUserBubble(turn.text, { id: bubbleId, createdAt: turn.createdAt, conversationId, last: edit, replaced });
  }
  // The same decision the live renderer makes as a reply ends (render-event.ts).
  const offers = decideTurnOffers(turn.status, { last, stored: true });
  const notes: Html[] = (turn.notices ?? []).map(renderNotice);
  if (offers.notice !== undefined) notes.push(renderNotice(offers.notice));
  // Kept in a reply that Retry replaced, where the page hides it (as it does live): the error was fixed.
  if (turn.error) notes.push(renderErrorBox(turn.error.message, { retry: offers.retry }));
  // Stryker disable next-line MethodExpression,ConditionalExpression,LogicalOperator: the turn before a reply is its message or replies it replaced, so the nearest one not replaced is its message
  const message = turns.slice(0, index).findLast((earlier) => earlier.role === 'user' && earlier.status !== 'replaced');
  if (offers.sendAgain && message) notes.push(renderSendAgain(message.text));
  const regenerate = offers.regenerate;
  // Ready but not made: why, with Generate on the last reply only.
  if (turn.imageNote && !replaced) notes.push(renderImageNote(turn.imageNote, last));
  // A reply being written now goes on live in this page (its live stream continues it from this text).
  const bubble = renderAssistantBubble(bubbleId, {
    ...(turn.status === 'running' ? { streaming: true } : {}),
    text: turn.text,
    notes: joinHtml(notes),
    images: turn.images,
    createdAt: turn.createdAt,
    replaced,
    ...(regenerate ? { actions: renderRegenerateButton() } : {}),
  });
  return turn.status === 'reset' ? joinHtml([bubble, renderDivider()]) : bubble;
}

/** What the status line knows of the chat models when the default one is missing (GET /status asks then). */
export interface StatusModels {
  /** The models Ollama has; undefined when it could not be listed. */
  installed: readonly string[] | undefined;
  /** The conversation's own chat model (its setting), null for the default. */
  chatModel: string | null;
}

/**
 * The status line stays short: a problem's whole explanation is said once, where it stopped a message or
 * an image (and here in the title), not twice on the same screen. The command that fixes it stays.
 * The health said is the default model's (--model); when it is missing, the conversation's own model, if
 * installed, is said instead, and other installed models are offered (Settings → Models), or a pull.
 */
export function renderStatus(health: Health['ollama'], images: ImageStatus & { reachable?: boolean; url?: string | null }, models?: StatusModels): Html {
  const ollama =
    health.reachable && health.modelAvailable
      ? html`<span class="state ok">${renderMessage(describeModelHealth(health))}</span>`
      : renderOllamaProblem(health, models);
  // The full how-to for a missing backend sits under the Generate button.
  const image = !images.configured
    ? html`<span class="state off">No image backend is configured: Easel crafts prompts only.</span>`
    : images.reachable === false
      ? html`<span class="state warn" title="${images.detail}">The image backend${images.url ? ` at ${images.url}` : ''} is not answering.</span>`
      : html`<span class="state ok">${renderMessage(images.detail)}</span>`;
  return html`${ollama} ${image}`;
}

function renderOllamaProblem(health: Health['ollama'], models: StatusModels | undefined): Html {
  const title = describeModelHealth(health);
  const missing = health.reachable && !health.modelAvailable && (health.remedy === undefined || health.remedy === `ollama pull ${health.model}`);
  const installed = models?.installed;
  if (!missing || installed === undefined) return html`<span class="state warn" title="${title}">${renderMessage(describeOllamaProblem(health))}</span>`;
  const own = models?.chatModel ?? null;
  if (own !== null && installed.includes(own)) {
    return html`<span class="state ok" title="${title}">Ollama is ready with ${own} (this conversation's model; the default ${health.model} is not pulled).</span>`;
  }
  const pull = html`<button type="button" class="link pull-missing" data-pull="${health.model}">pull it</button>`;
  if (installed.length === 0) {
    return html`<span class="state warn" title="${title}">${renderMessage(describeOllamaProblem(health).replace(/\.$/, ''))}, or ${pull}.</span>`;
  }
  const pick = html`<a href="#setting-chatModel" class="pick-model">Pick an installed model in Settings → Models</a>`;
  return html`<span class="state warn" title="${title}">${health.model} is not pulled. ${pick}, or ${pull}.</span>`;
}

function describeOllamaProblem(health: Health['ollama']): string {
  const remedy = health.remedy ?? (health.reachable ? `ollama pull ${health.model}` : 'ollama serve');
  if (!health.reachable) return `Ollama is not reachable: run \`${remedy}\`.`;
  if (remedy === `ollama pull ${health.model}`) return `The model ${health.model} is not pulled: run \`${remedy}\`.`;
  return `Ollama is not ready: run \`${remedy}\`.`;
}

export function renderMissingPage(): Html {
  return renderDocument(
    'Easel: conversation not found',
    html`<body class="missing"><main class="panel missing-panel"><h1>This conversation does not exist</h1>
<p>It may have been deleted, or made with another data directory.</p>
<p><a href="/" class="button primary">New conversation</a></p></main></body>`,
  );
}

/** Switching to a conversation that is gone (deleted in another tab): said in its place, the list refreshed. */
export function renderMissingPart(): Html {
  return joinHtml([
    html`<title>Easel: conversation not found</title>`,
    html`<main id="conversation" class="layout missing-part"><section class="panel missing-panel"><h2>This conversation does not exist any more</h2><p>It may have been deleted in another tab. Pick another one, or start a new one.</p></section></main>`,
  ]);
}

/** The answer to a prompt save: a message next to the field, or a quiet confirmation. */
export function renderPromptSaved(error: string | undefined): Html {
  return joinHtml([
    renderPartial('#prompt-error', 'innerHTML', error ? html`${error}` : EMPTY),
    renderPartial('#prompt-saved', 'innerHTML', error ? EMPTY : html`Saved.`),
  ]);
}

/** One message slot per field, so fixing a field also clears its old message. */
export function renderSettingsSaved(fields: Partial<Record<string, string>>, summary: string): Html {
  return joinHtml([
    ...ERROR_SLOTS.map((name) => renderPartial(`#error-${name}`, 'innerHTML', fields[name] ? html`${fields[name]}` : EMPTY)),
    renderPartial('#settings-status', 'innerHTML', html`${summary}`),
  ]);
}

export function renderComposerStatus(message: string): Html {
  return renderPartial('#composer-status', 'innerHTML', html`<span class="composer-error">${message}</span>`);
}

export type { ImageRecord };
