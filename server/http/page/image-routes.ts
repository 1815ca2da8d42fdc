// The page's routes of pictures: Generate (a batch, a comparison, Vary, Fix), a reference image, the vision
// model's Check and Describe, following an image being made, and the cancels.
import { Hono } from 'hono';
import { readFormBody, STATUS } from '../errors.ts';
import { withRequestSignal } from '../stream-events.ts';
import { isReferenceType, type TurnEvent } from '../../core/index.ts';
import { renderCreated } from './library.ts';
import { EMPTY, html, joinHtml, renderMessage, renderPartial, type Html } from './markup.ts';
import { renderPaneUpdate } from './pane.ts';
import { expectOwn } from './live-view.ts';
import { isBubbleId, renderCheckStarted, renderDescribeStatus, renderImageError, renderReferenceAdded, type StreamView } from './render-event.ts';
import { readSettingsForm, withoutUnchangedChoices } from './settings-form.ts';
import { isSendKey } from './send-guard.ts';
import { LIST_CHANGED, renderStalePane, sendHtml, streamHtml, type PageContext } from './page-kit.ts';
import type { PageDeps } from './routes.ts';

export function addImageRoutes(page: Hono, deps: PageDeps, context: PageContext): void {
  const { service, logger } = deps;
  const { ownWorkOf, changeFromPage, renderGoLive, renderOwnPane, headOf, sends } = context;

  page.post('/c/:id/generations', async (c) => {
    const id = c.req.param('id');
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const form = body.value;
    if (!isSendKey(form.sendKey) || !sends.claim(form.sendKey)) {
      const message = isSendKey(form.sendKey) ? 'This image was already asked for once; it is not made twice.' : 'This page is out of date: reload it.';
      return sendHtml(c, renderPartial('#image-error', 'innerHTML', renderImageError(message)), 409);
    }
    const hangup = new AbortController();
    // The image is made from exactly what is shown: the prompt (saved first as a version, by the core) and the
    // settings as they are, even a change whose save has not arrived yet.
    // Stryker disable next-line ConditionalExpression: a form without settings reads as { autoGenerate: false }, which no image reads; a first Generate stores it, the default
    const hasSettings = 'steps' in form || 'negativePrompt' in form;
    // Vary: the submit button's `from` (<imageId>:<strength>). The image keeps its starting image's size: the form's
    // width and height are the pane's, for a Generate.
    const from = readVaryForm(form.from);
    const settings = hasSettings ? withoutUnchangedChoices(readSettingsForm(form), service.getPane(id)?.settings) : undefined;
    if (settings && from !== undefined) {
      delete settings.width;
      delete settings.height;
    }
    const overrides = {
      // Stryker disable next-line ConditionalExpression: { prompt: undefined }: the service reads an undefined prompt as none
      ...(typeof form.prompt === 'string' ? { prompt: form.prompt } : {}),
      // "Compare with previous": the prompt on screen (saved first, by the core) and the version it was changed from.
      ...(form.compare === 'previous' ? { promptVersions: 'previous' } : {}),
      // A model choice as stored is not sent again: the servers are not asked about a name nobody changed.
      ...(settings ? { settings } : {}),
      ...(from === undefined ? {} : { from }),
      // Count beside Generate: how many images (a batch); one that is not a number is passed on for the service to name.
      ...(form.count === undefined || form.count === '' ? {} : { count: /^\s*\d+\s*$/.test(String(form.count)) ? Number(form.count) : form.count }),
      // Fix and regenerate under a critique: the checked picture's id (its revised prompt, its seed and size).
      ...(form.fix === undefined || form.fix === '' ? {} : { fix: form.fix }),
    };
    const creating = form.startNew === '1' && !service.getSummary(id);
    const own = ownWorkOf(form.viewId);
    expectOwn(own.pendingImages, id, 1);
    // The page's image is the server's, like its replies: closing or reloading the page ends only this stream
    // (the image goes on, shown in every page and after a reload); Cancel and Stop end it.
    if (overrides.settings) await withRequestSignal(c, (signal) => service.prepareModelChoice(overrides.settings, signal));
    // The gallery's Remix and Vary make a picture from another picture's prompt: not the conversation's pane, so
    // not saved as its prompt (the image records no version); Use prompt is how that prompt becomes the pane's.
    const fromScreen = form.origin !== 'gallery';
    const result = changeFromPage(id, form, (baseRevision) => service.generate(id, overrides, hangup.signal, { create: creating, fromScreen, baseRevision, outlivesReader: true }));
    if (!result.ok) {
      expectOwn(own.pendingImages, id, -1);
      // Made from an older pane than the stored one: the newer pane is shown (typing kept), nothing is made.
      const newer = result.error.code === 'stale' && result.error.pane ? renderPaneUpdate(id, result.error.pane) : EMPTY;
      // A prompt the pane cannot hold is said in its own words, not the API's `prompt: …`.
      return sendHtml(c, joinHtml([newer, renderPartial('#image-error', 'innerHTML', renderImageError(result.error.fields?.prompt ?? result.error.fields?.promptVersions ?? result.error.message))]), STATUS[result.error.code]);
    }
    // Stryker disable next-line BooleanLiteral: a Generate stream has no bubble: every error goes to the image area either way
    const view: StreamView = { conversationId: id, imageStarted: true };
    // A first Generate made the conversation: the page takes its place in the library at once.
    const head = creating ? headOf(id) : undefined;
    // The prompt on screen was saved first: the page learns the pane's new revision at once.
    // It follows the new conversation from here, its own image not drawn twice.
    const goLive = () => renderGoLive(id, (own) => expectOwn(own.pendingImages, id, 1));
    const first = head ? [{ data: String(joinHtml([renderCreated(head), renderOwnPane(id), goLive()])) }, LIST_CHANGED] : [{ data: String(renderOwnPane(id)) }];
    return streamHtml(c, { ...(first ? { first } : {}), events: result.value, view, hangup, logger, keepAliveMs: deps.keepAliveMs });
  });

  // The page's Stop is the reply's: an image being made has its own Cancel.
  // A reference image dropped, pasted or chosen on the page (web/js/reference.js): a form holding the file, which
  // the API takes as the body. The same rules (PNG, JPEG or WebP; the image limits); shown in the chat with its Vary buttons.
  page.post('/c/:id/references', async (c) => {
    const refused = (message: string, status: 400 | 404 | 409 | 413 | 415 | 422 | 503) =>
      c.html(String(renderPartial('#image-error', 'innerHTML', renderImageError(message))), status);
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const file = body.value.file;
    if (!(file instanceof File) || file.size === 0) return refused('Choose a PNG, JPEG or WebP picture to add as a reference image.', 422);
    if (!isReferenceType(file.type)) {
      return refused(`${file.name || 'The file'} is not a PNG, JPEG or WebP picture${file.type ? ` (it is ${file.type})` : ''}: add one of those as a reference image.`, 415);
    }
    const id = c.req.param('id');
    // On the empty page the picture starts the conversation, as a first message or Generate does.
    const creating = body.value.startNew === '1' && !service.getSummary(id);
    const added = await service.addReference(id, new Uint8Array(await file.arrayBuffer()), file.type, { create: creating });
    if (!added.ok) return refused(added.error.message, STATUS[added.error.code]);
    const head = creating ? headOf(id) : undefined;
    // The library lists the new conversation at once.
    if (head) c.header('HX-Trigger', JSON.stringify({ 'easel:list': { target: 'body' } }));
    return sendHtml(
      c,
      joinHtml([
        head ? joinHtml([renderCreated(head), renderGoLive(id, () => {})]) : EMPTY,
        renderPartial('#image-error', 'innerHTML'),
        renderReferenceAdded(added.value.image),
      ]),
      201,
    );
  });

  // Check under a picture: the vision model looks at it and says what it shows of the request and what it misses,
  // under the picture (every other page draws the same from its live view). A refusal (no vision model, a reference
  // image) is said in the image error slot. Closing the page ends the check.
  page.post('/c/:id/images/:imageId/check', async (c) => {
    const id = c.req.param('id');
    const imageId = c.req.param('imageId');
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const hangup = new AbortController();
    const result = await withRequestSignal(c, (signal) => service.checkImage(id, imageId, { signal: AbortSignal.any([signal, hangup.signal]) }));
    if (!result.ok) return sendHtml(c, renderPartial('#image-error', 'innerHTML', renderVisionRefusal(result.error)), STATUS[result.error.code]);
    const settings = service.getPane(id)?.settings;
    const model = settings ? service.visionModelOf(settings) : null;
    const view: StreamView = { conversationId: id, checking: imageId };
    return streamHtml(c, {
      first: joinHtml([renderPartial('#image-error', 'innerHTML'), model === null ? EMPTY : renderCheckStarted(id, imageId, model)]),
      events: result.value,
      view,
      hangup,
      logger,
      keepAliveMs: deps.keepAliveMs,
    });
  });

  // Describe: a picture dropped or pasted on the prompt, or chosen beside it (web/js/describe.js): a form holding the
  // file, which the API takes as the body. Its description becomes the prompt, one undo away; the prompt on screen
  // comes along and is saved first, so typing not saved yet is that one undo. Said beside the prompt.
  page.post('/c/:id/describe', async (c) => {
    const refused = (message: Html, status: 400 | 404 | 409 | 413 | 415 | 422 | 503, more: Html = EMPTY) =>
      c.html(String(joinHtml([renderDescribeStatus(message, 'error'), more])), status);
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const form = body.value;
    const file = form.file;
    if (!(file instanceof File) || file.size === 0) return refused(html`Choose a PNG, JPEG or WebP picture to describe.`, 422);
    if (!isReferenceType(file.type)) {
      return refused(html`${file.name || 'The file'} is not a PNG, JPEG or WebP picture${file.type ? ` (it is ${file.type})` : ''}: describe one of those.`, 415);
    }
    const id = c.req.param('id');
    // On the empty page the picture starts the conversation, as a first message does (once it can be described).
    const creating = form.startNew === '1' && !service.getSummary(id);
    if (!creating && !service.getSummary(id)) return refused(html`This conversation no longer exists. Start a new one.`, 404);
    if (!creating && typeof form.prompt === 'string') {
      const saved = changeFromPage(id, form, (baseRevision) => service.setPrompt(id, form.prompt, { baseRevision }));
      if (!saved.ok) return refused(html`Not described: ${saved.error.fields?.prompt ?? saved.error.message}`, STATUS[saved.error.code], renderStalePane(id, saved));
    }
    const hangup = new AbortController();
    const bytes = new Uint8Array(await file.arrayBuffer());
    // The empty page's prompt and settings go into the conversation the picture starts, as a first message's do.
    const settings = creating && 'steps' in form ? readSettingsForm(form) : undefined;
    if (settings) await withRequestSignal(c, (signal) => service.prepareModelChoice(settings, signal));
    const create = creating ? { ...(typeof form.prompt === 'string' ? { prompt: form.prompt } : {}), ...(settings ? { settings } : {}) } : undefined;
    const result = await withRequestSignal(c, (signal) =>
      service.describePicture(id, bytes, file.type, { signal: AbortSignal.any([signal, hangup.signal]), ...(create ? { create } : {}) }),
    );
    if (!result.ok) return refused(renderVisionRefusal(result.error, false), STATUS[result.error.code]);
    const view: StreamView = { conversationId: id, describing: true };
    const status = renderDescribeStatus(html`Describing the picture…`);
    // A new conversation: the page takes its place in the library and follows it from here.
    const head = creating ? headOf(id) : undefined;
    const first = head ? [{ data: String(joinHtml([status, renderCreated(head), renderGoLive(id, () => {})])) }, LIST_CHANGED] : status;
    return streamHtml(c, { first, events: result.value, view, hangup, logger, keepAliveMs: deps.keepAliveMs });
  });

  // An automatic image, followed by the block that shows its progress (after its reply, or after a reload).
  page.get('/c/:id/images/:imageId/events', (c) => {
    const id = c.req.param('id');
    const imageId = c.req.param('imageId');
    const bubble = c.req.query('bubble');
    // The images the page shows already are not drawn twice (a reload mid-batch): those named in `skip`, else,
    // while it is still being made, the ones stored now. One that ended is replayed whole: its last image ends its block.
    const skip = c.req.query('skip');
    const conversation = skip === undefined ? service.getConversation(id) : undefined;
    const running = conversation?.generating.some((image) => image.id === imageId) === true;
    // Stryker disable next-line OptionalChaining,ArrayDeclaration: running means the conversation was read; a skip list of an id no image has skips nothing, as an empty one does
    const skipImages = skip !== undefined ? skip.split(',').slice(0, 1000) : running ? (conversation?.images.map((image) => image.id) ?? []) : [];
    const result = service.followImage(id, imageId, { skipImages });
    // Stryker disable next-line BooleanLiteral: the follower's stream replays the image's generation event first, and onEvent sets it then
    const view: StreamView = { conversationId: id, imageStarted: true, generationId: imageId, ...(isBubbleId(bubble) ? { bubbleId: bubble } : {}) };
    // Gone already (ended a while ago): its block goes; a reload shows the image where it belongs.
    const events: AsyncIterable<TurnEvent> = result.ok ? result.value : (async function* () {})();
    return streamHtml(c, {
      events,
      view,
      // Following never cancels the image: closing the page only stops the reading.
      hangup: new AbortController(),
      logger,
      keepAliveMs: deps.keepAliveMs,
      skip: (event) => event.type === 'generation',
      ...(result.ok ? {} : { first: renderPartial(`#generation-${imageId.replace(/[^A-Za-z0-9_-]/g, '')}`, 'delete') }),
    });
  });

  // Cancel stops only the images: a reply being written at the same time goes on.
  page.post('/c/:id/images/cancel', (c) => {
    service.cancelImages(c.req.param('id'));
    return c.body(null, 204);
  });

  // Cancel beside "Checking…": the vision model's checks and descriptions end; the images being made go on.
  page.post('/c/:id/checks/cancel', (c) => {
    service.cancelChecks(c.req.param('id'));
    return c.body(null, 204);
  });

  // One image's own Cancel: the others go on.
  page.post('/c/:id/images/:imageId/cancel', (c) => {
    service.cancelImage(c.req.param('id'), c.req.param('imageId'));
    return c.body(null, 204);
  });
}

/**
 * A Vary button's value, `<imageId>:<strength>`, as the API's `from`; anything else is passed on as it is, so
 * the service's refusal names it. Absent: a Generate.
 */
function readVaryForm(value: unknown): unknown {
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') return value;
  const cut = value.lastIndexOf(':');
  const strength = Number(value.slice(cut + 1));
  // Stryker disable next-line ArithmeticOperator,StringLiteral: an empty or blank strength reads as 0, below Vary's minimum: refused in the same words as the value itself
  return cut > 0 && value.slice(cut + 1).trim() !== '' && Number.isFinite(strength) ? { imageId: value.slice(0, cut), strength } : value;
}

/**
 * The vision model's refusal in its words; without a vision model (503), where to choose one: Settings → Models (a
 * link that opens it). `boxed`: as the image error slot shows it.
 */
function renderVisionRefusal(error: { code: string; message: string }, boxed = true): Html {
  const pick = error.code === 'unavailable' ? html` <a href="#setting-visionModel" class="pick-model" data-field="setting-visionModel">Open Settings → Models</a>` : EMPTY;
  const words = html`${renderMessage(error.message)}${pick}`;
  return boxed ? html`<p class="image-error" role="alert">${words}</p>` : words;
}
