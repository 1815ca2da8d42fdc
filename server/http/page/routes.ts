import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import { Hono } from 'hono';
import { readFormBody, refuseNonFormBody, STATUS } from '../errors.ts';
import { streamEvents, withRequestSignal, type SseMessage } from '../stream-events.ts';
import { DEFAULT_SETTINGS, type ConversationView, type EaselService, type FeedEntry, type LibraryEvent, type LiveEvent, type Logger, type PaneView, type PullEvent, type Result, type TurnEvent } from '../../core/index.ts';
import { mergeStreams } from '../../util/index.ts';
import { loadAssets } from './assets.ts';
import { conversationPath } from './bubbles.ts';
import { renderChatHead, renderConversationItems } from './library.ts';
import { galleryPath, renderGalleryMore, renderGalleryPage, renderGalleryResults } from './gallery.ts';
import { EMPTY, html, joinHtml, renderMessage, renderPartial, type Html } from './markup.ts';
import { renderModelsUpdate, renderPullEvent, renderPullRefused, renderPullStarted, type ModelChoices } from './models-view.ts';
import { renderPaneUpdate } from './pane.ts';
import { createLiveView, expectOwn } from './live-view.ts';
import { renderTurnStart, type StreamView } from './render-event.ts';
import { isSendKey } from './send-guard.ts';
import { addImageRoutes } from './image-routes.ts';
import { createPageContext, LIST_CHANGED, renderStalePane, sendHtml, streamHtml } from './page-kit.ts';
import { CHOICE_FIELDS, readSettingsForm, withoutUnchangedChoices } from './settings-form.ts';
import {
  renderComposerStatus,
  renderConversationPage,
  renderGenerateButton,
  renderVaryHelp,
  renderConversationSwitch,
  renderMissingPage,
  renderMissingPart,
  renderPromptSaved,
  renderSettingsSaved,
  renderStatus,
  renderTranscript,
  type ImageStatus,
  type PageModel,
} from './views.ts';

export interface PageDeps {
  service: EaselService;
  logger: Logger;
  /** Overrides the image backend's state shown in the status line (default: the service's health check). */
  imageStatus?: () => Promise<ImageStatus & { reachable?: boolean }>;
  /** Quiet time before an SSE keep-alive comment (default 15 s); tests shorten it. */
  keepAliveMs?: number;
}


/** The web page: server-rendered HTML, htmx fragments and SSE streams of HTML, and its assets. */
export function createPageRoutes(deps: PageDeps): Hono {
  const { service, logger } = deps;
  const page = new Hono();
  const assets = loadAssets();
  // The page's own script modules (web/js/*.js, served as /assets/<name>.js): the gallery asks for them first.
  const modules = [...assets.keys()].filter((name) => name.endsWith('.js') && name !== 'easel.js' && !name.startsWith('htmx') && !name.startsWith('hx-'));

  // The page's writes (all under /c) are htmx form posts; anything else (JSON, text/plain) was not sent
  // by the page. Not '*': mounted at '/', that would reach the API's unknown routes too.
  page.use('/c/*', async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    const refused = refuseNonFormBody(c);
    return refused ?? next();
  });

  const PENDING_IMAGES: ImageStatus = { configured: false, detail: 'Checking the image backend…' };
  // What /status last found: a page or a conversation switch shows it at once (its own /status refreshes it),
  // rather than "Checking…" under Generate while the status line already says the backend answers.
  let knownImages: ImageStatus = PENDING_IMAGES;
  const context = createPageContext(service);
  const { ownWorkOf, changeFromPage, renderGoLive, renderOwnPane, headOf, sends } = context;

  function pageModel(conversation: ConversationView, isNew: boolean, query: string, snapshotId?: string): PageModel {
    return {
      conversation,
      isNew,
      busy: !isNew && service.isBusy(conversation.id),
      library: { conversations: service.listConversations(query), currentId: isNew ? '' : conversation.id, query },
      imageStatus: knownImages,
      ...(snapshotId === undefined ? {} : { live: { snapshotId, viewId: randomBytes(8).toString('hex') } }),
    };
  }


  /** A full page for a navigation; only the conversation's part for an htmx switch from the sidebar. */
  function sendPage(c: Context, model: PageModel): Response {
    c.header('Cache-Control', 'no-store');
    c.header('Vary', 'HX-Request');
    return sendHtml(c, isHtmxRequest(c) ? renderConversationSwitch(model) : renderConversationPage(model));
  }

  // A new conversation's empty page. Nothing is stored until its first message (or Generate), which
  // creates it under the id chosen here.
  // Stryker disable next-line StringLiteral: page.get('') for '/': hono's router reads '' as '/'
  page.get('/', (c) => sendPage(c, pageModel(service.draftConversation(), true, c.req.query('q') ?? '')));

  page.get('/c/:id', (c) => {
    // The page is drawn from a snapshot (a running reply's text as shown now), and its live stream resumes after it.
    const snapshot = service.snapshotConversation(c.req.param('id'));
    if (!snapshot) {
      c.header('Cache-Control', 'no-store');
      return isHtmxRequest(c) ? sendHtml(c, renderMissingPart(), 404) : sendHtml(c, renderMissingPage(), 404);
    }
    return sendPage(c, pageModel(snapshot.view, false, c.req.query('q') ?? '', snapshot.snapshotId));
  });

  // The page's live view of a conversation (views.ts renderLiveStream): every change from any tab, as partials.
  page.get('/c/:id/events', (c) => {
    const id = c.req.param('id');
    const hangup = new AbortController();
    const lastEventId = c.req.header('last-event-id') ?? c.req.query('after');
    const followed = service.followConversation(id, { lastEventId, signal: hangup.signal });
    if (!followed.ok) return sendHtml(c, renderComposerStatus(followed.error.message), STATUS[followed.error.code]);
    const { snapshot, snapshotId, running, entries } = followed.value;
    const live = createLiveView({ service, conversationId: id, own: ownWorkOf(c.req.query('view')), running });
    // Too far behind to resume (events no longer kept, a restart): the log and the pane are drawn again.
    const first: SseMessage[] = snapshot
      ? [{ id: snapshotId, data: String(joinHtml([renderPartial('#log', 'innerHTML', renderTranscript(id, snapshot.turns, snapshot.images, service.isBusy(id), snapshot.generating, snapshot.checks)), renderPaneUpdate(id, snapshot.pane)])) }]
      : [];
    // A reconnect may have missed changes of the list too (its events are not resumed): it is fetched again.
    if (c.req.header('last-event-id') !== undefined) first.push(LIST_CHANGED);
    // The library's changes come on the same connection (a browser holds six per host), without ids.
    const library = service.followLibrary({ signal: hangup.signal }).entries;
    const events = mergeStreams<FeedEntry<LiveEvent | LibraryEvent> & { library?: true }>([entries, mapStream(library, (entry) => ({ ...entry, library: true as const }))]);
    return streamEvents(c, {
      events,
      hangup,
      logger,
      ...(deps.keepAliveMs === undefined ? {} : { keepAliveMs: deps.keepAliveMs }),
      ...(first.length > 0 ? { first } : {}),
      render: (entry) => {
        if (entry.library) return LIST_CHANGED;
        const event = entry.event as LiveEvent;
        // Every event of the conversation carries its id, drawn or not, so a reconnect resumes after the last one seen.
        return [{ id: entry.id, data: String(live.render(event)) }, ...(event.type === 'deleted' ? [CLOSED] : [])];
      },
    });
  });

  // The empty page's live view: the sidebar's list follows the library (created, renamed, updated, deleted).
  page.get('/library/events', (c) => {
    const hangup = new AbortController();
    const { entries } = service.followLibrary({ signal: hangup.signal });
    return streamEvents(c, {
      events: entries,
      hangup,
      logger,
      ...(deps.keepAliveMs === undefined ? {} : { keepAliveMs: deps.keepAliveMs }),
      ...(c.req.header('last-event-id') !== undefined ? { first: LIST_CHANGED } : {}),
      render: () => LIST_CHANGED,
    });
  });

  // The sidebar's list: a search, or a refresh after a turn began (its order and titles changed).
  page.get('/conversations', (c) => {
    const query = c.req.query('q') ?? '';
    c.header('Cache-Control', 'no-store');
    // Stryker disable next-line StringLiteral: no conversation has that id (ids are UUIDs), so none is marked either way
    return sendHtml(c, renderConversationItems({ conversations: service.listConversations(query), currentId: c.req.query('current') ?? '', query }));
  });

  // The gallery: every picture made, newest first (gallery.ts draws it, web/js/gallery.js runs its large view).
  page.get('/gallery', (c) => {
    c.header('Cache-Control', 'no-store');
    const listed = service.listGallery(c.req.query());
    const filters = service.listGalleryFilters();
    if (listed.ok) return sendHtml(c, renderGalleryPage({ page: listed.value, filters, modules }));
    // A link with a value out of range: the whole gallery, saying what was refused.
    const all = service.listGallery({});
    return all.ok ? sendHtml(c, renderGalleryPage({ page: all.value, filters, modules, refusal: listed.error.message }), 422) : sendHtml(c, html`${all.error.message}`, 422);
  });

  // A search, a filter (the grid again, the address following it) or "More" (`before`: the next pictures added).
  page.get('/gallery/images', (c) => {
    c.header('Cache-Control', 'no-store');
    const listed = service.listGallery(c.req.query());
    const filters = service.listGalleryFilters();
    if (!listed.ok) {
      return sendHtml(c, renderPartial('#gallery-status', 'innerHTML', html`<span class="gallery-refusal">${listed.error.message}</span>`), 422);
    }
    if (listed.value.query.before !== undefined) return sendHtml(c, renderGalleryMore({ page: listed.value, filters }));
    c.header('HX-Replace-Url', galleryPath(listed.value.query));
    return sendHtml(c, renderGalleryResults({ page: listed.value, filters }));
  });

  page.patch('/c/:id', async (c) => {
    const id = c.req.param('id');
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const result = service.renameConversation(id, body.value.title);
    if (!result.ok) {
      return sendHtml(c, renderPartial('#rename-error', 'innerHTML', html`${result.error.fields?.title ?? result.error.message}`), STATUS[result.error.code]);
    }
    // On the body: the form that sent this is replaced with the head, and an event on it would reach no one.
    c.header('HX-Trigger', JSON.stringify({ 'easel:list': { target: 'body' } }));
    const head = headOf(id);
    return sendHtml(c, head ? renderPartial('#chat-head', 'outerHTML', renderChatHead({ ...head, imageCount: service.getConversation(id)?.images.length ?? 0 })) : EMPTY);
  });

  page.delete('/c/:id', async (c) => {
    const result = await service.deleteConversation(c.req.param('id'));
    if (!result.ok) return sendHtml(c, renderComposerStatus(result.error.message), STATUS[result.error.code]);
    // The empty page of a new conversation takes its place.
    c.header('HX-Redirect', '/');
    return c.body(null, 200);
  });

  // The page's Import: a form holding the .zip (multipart); the API takes the zip as the body.
  page.post('/c/import', async (c) => {
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const file = body.value.file;
    if (!(file instanceof File) || file.size === 0) {
      return sendHtml(c, renderImportStatus('Choose a .zip made with Export.'), 422);
    }
    const result = await service.importConversation(new Uint8Array(await file.arrayBuffer()));
    if (!result.ok) return sendHtml(c, renderImportStatus(result.error.message), STATUS[result.error.code]);
    c.header('HX-Redirect', conversationPath(result.value.id));
    return c.body(null, 201);
  });

  page.post('/c/:id/messages', async (c) => {
    const id = c.req.param('id');
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const form = body.value;
    if (!isSendKey(form.sendKey)) {
      return sendHtml(c, renderComposerStatus('This page is out of date: reload it, then send again. Your text is kept.'), 400);
    }
    if (!sends.claim(form.sendKey)) {
      return sendHtml(c, renderComposerStatus('This message was already sent once; it is not sent twice.'), 409);
    }
    const creating = form.startNew === '1';
    const hangup = new AbortController();
    const own = ownWorkOf(form.viewId);
    expectOwn(own.pendingTurns, id, 1);
    // An unsaved prompt edit travels with the message, so the model hears of it in this very turn; on the
    // empty page the settings too (there is nothing to save them into yet), its model choices asked about first.
    const settings = creating ? readSettingsForm(form) : undefined;
    if (settings) await withRequestSignal(c, (signal) => service.prepareModelChoice(settings, signal));
    const result = changeFromPage(id, form, (baseRevision) =>
      service.sendMessage(id, form.text, hangup.signal, {
        ...(settings ? { create: true, settings } : {}),
        // Stryker disable next-line ConditionalExpression: { prompt: undefined }: the service reads an undefined prompt as none
        ...(typeof form.prompt === 'string' ? { prompt: form.prompt } : {}),
        ...(form.replaceLast === '1' ? { replaceLast: true } : {}),
        baseRevision,
      }),
    );
    if (!result.ok) expectOwn(own.pendingTurns, id, -1);
    if (!result.ok) {
      if (result.error.code === 'stale' && result.error.pane) {
        return sendHtml(c, joinHtml([renderPaneUpdate(id, result.error.pane), renderComposerStatus(`Not sent: ${result.error.message}`)]), 409);
      }
      if (result.error.code === 'not_found') return sendHtml(c, renderComposerStatus('This conversation no longer exists. Start a new one; your text is kept.'), 404);
      const promptError = result.error.fields?.prompt;
      if (promptError) return sendHtml(c, joinHtml([renderPromptSaved(promptError), renderComposerStatus('Not sent: fix the prompt first.')]), 422);
      return sendHtml(c, renderComposerStatus(result.error.fields?.text ?? result.error.message), STATUS[result.error.code]);
    }
    const view: StreamView & { bubbleId: string; at: string } = {
      conversationId: id,
      bubbleId: newBubbleId(),
      userText: String(form.text).trim(),
      at: new Date().toISOString(),
      ...(creating ? { describeCreated: () => headOf(id) } : {}),
    };
    // The prompt or settings on screen may have been saved with the message: the page learns the pane's new revision at once.
    return streamHtml(c, {
      first: joinHtml([renderTurnStart(view), renderOwnPane(id)]),
      events: result.value,
      view,
      hangup,
      logger,
      keepAliveMs: deps.keepAliveMs,
      // The conversation exists once the message is stored: from then on the page follows it like any other.
      ...(creating ? { after: (event: TurnEvent) => (event.type === 'started' ? renderGoLive(id, (own) => own.turns.add(event.turnId)) : EMPTY) } : {}),
    });
  });

  page.post('/c/:id/regenerate', async (c) => {
    const id = c.req.param('id');
    const hangup = new AbortController();
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const own = ownWorkOf(body.value.viewId);
    expectOwn(own.pendingTurns, id, 1);
    const result = service.regenerate(id, hangup.signal);
    if (!result.ok) expectOwn(own.pendingTurns, id, -1);
    if (!result.ok) return sendHtml(c, renderComposerStatus(result.error.message), STATUS[result.error.code]);
    const view: StreamView & { bubbleId: string; at: string } = { conversationId: id, bubbleId: newBubbleId(), at: new Date().toISOString() };
    return streamHtml(c, { first: renderTurnStart(view), events: result.value, view, hangup, logger, keepAliveMs: deps.keepAliveMs });
  });

  page.post('/c/:id/stop', (c) => {
    service.stopReply(c.req.param('id'));
    return c.body(null, 204);
  });

  addImageRoutes(page, deps, context);

  page.put('/c/:id/prompt', async (c) => {
    const id = c.req.param('id');
    if (!service.getSummary(id)) return sendHtml(c, renderPromptSaved('This conversation no longer exists. Start a new one.'), 404);
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const result = changeFromPage(id, body.value, (baseRevision) => service.setPrompt(id, body.value.prompt, { baseRevision }));
    // Said beside the prompt in the field's own words: the API's message names the field (`prompt: …`).
    if (!result.ok) return sendHtml(c, joinHtml([renderPromptSaved(result.error.fields?.prompt ?? result.error.message), renderStalePane(id, result)]), STATUS[result.error.code]);
    return sendHtml(c, joinHtml([renderPromptSaved(undefined), renderPaneUpdate(id, result.value)]));
  });

  page.put('/c/:id/settings', async (c) => {
    const id = c.req.param('id');
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const form = body.value;
    // `changed` names the fields the user changed (web/easel.js): only those are set by hand, and pinned.
    const only = typeof form.changed === 'string' ? form.changed.split(',') : undefined;
    // Only the choices the user changed are checked, so a server that is down refuses nothing else; one the
    // servers did not list yet is asked about first, as the API's PUT does.
    const patch = withoutUnchangedChoices(readSettingsForm(form), service.getPane(id)?.settings, only);
    await withRequestSignal(c, (signal) => service.prepareModelChoice(patch, signal));
    const result = changeFromPage(id, form, (baseRevision) => service.setSettings(id, patch, { ...(only ? { only } : {}), baseRevision }));
    if (!result.ok && result.error.code === 'stale') return sendHtml(c, joinHtml([renderSettingsSaved({}, `Not saved: ${result.error.message}`), renderStalePane(id, result)]), 409);
    if (result.ok) {
      const pane = service.getPane(id);
      return sendHtml(c, joinHtml([renderSettingsSaved({}, 'Saved.'), pane ? renderPaneUpdate(id, pane) : EMPTY]));
    }
    const summary = result.error.code === 'invalid' ? 'Not saved: fix the marked field.' : result.error.message;
    return sendHtml(c, renderSettingsSaved(result.error.fields ?? {}, summary), STATUS[result.error.code]);
  });

  // Undo and redo: what is on screen and not saved yet is saved first, so undo also undoes that typing.
  for (const direction of ['undo', 'redo'] as const) {
    page.post(`/c/:id/prompt/${direction}`, async (c) => {
      const id = c.req.param('id');
      const body = await readFormBody(c);
      if (!body.ok) return body.response;
      const prompt = typeof body.value.prompt === 'string' ? { prompt: body.value.prompt } : {};
      return sendPane(c, id, changeFromPage(id, body.value, (baseRevision) => (direction === 'undo' ? service.undoPrompt(id, { ...prompt, baseRevision }) : service.redoPrompt(id, { ...prompt, baseRevision }))));
    });
  }

  // "Use suggestion" (accept=1) or "Keep mine" (accept=0); typing not saved yet is kept as a version first.
  // "This one" under a comparison: the chosen version becomes the prompt, and the model hears of the choice.
  page.post('/c/:id/compare/pick', async (c) => {
    const id = c.req.param('id');
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const number = (value: unknown) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value);
    // The prompt on screen comes along (hx-include) and is saved first, as for undo: typing not yet saved is kept.
    const prompt = typeof body.value.prompt === 'string' ? { prompt: body.value.prompt } : {};
    return sendPane(c, id, changeFromPage(id, body.value, (baseRevision) => service.pickComparedPrompt(id, number(body.value.promptVersion), number(body.value.over), { ...prompt, baseRevision })));
  });

  page.post('/c/:id/suggestion', async (c) => {
    const id = c.req.param('id');
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const accept = body.value.accept === '1';
    const prompt = typeof body.value.prompt === 'string' ? { prompt: body.value.prompt } : {};
    return sendPane(c, id, changeFromPage(id, body.value, (baseRevision) => service.answerSuggestion(id, accept, { ...prompt, baseRevision })));
  });

  page.post('/c/:id/settings/unpin', async (c) => {
    const id = c.req.param('id');
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const result = changeFromPage(id, body.value, (baseRevision) => service.setSettings(id, { unpin: [body.value.field] }, { baseRevision }));
    const pane = service.getPane(id);
    // Stryker disable next-line StringLiteral: unreachable: setSettings and getPane run in the same synchronous handler
    if (!result.ok || !pane) return sendPane(c, id, result.ok ? { ok: false, error: { code: 'not_found', message: 'This conversation no longer exists.' } } : result);
    return sendPane(c, id, { ok: true, value: pane });
  });

  page.post('/c/:id/settings/suggestion', async (c) => {
    const id = c.req.param('id');
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    return sendPane(c, id, changeFromPage(id, body.value, (baseRevision) => service.takeSettingSuggestion(id, body.value.field, { baseRevision })));
  });

  // The status line; the page sends its conversation's chat model (`chatModel`, '' for the default). The health
  // checked is the default model's (the service's checkHealth); when it is missing, it says which models Ollama
  // has, so the line can say whether the conversation's own is there, or which to pick instead.
  page.get('/status', async (c) => {
    const health = await withRequestSignal(c, (signal) => service.checkHealth(signal));
    const images = deps.imageStatus ? await deps.imageStatus() : health.images;
    knownImages = images;
    // A missing model's health lists the models Ollama has (`installed`): the conversation's own may be one.
    const installed = health.ollama.installed;
    const models = installed === undefined ? undefined : { installed, chatModel: c.req.query('chatModel') || null };
    return sendHtml(c, joinHtml([renderStatus(health.ollama, images, models), renderGenerateState(images)]));
  });

  // Settings → Models' options, from Ollama and the image server (views.ts draws the section without them, so a
  // slow or stopped server never holds the page). The choices on screen come as the query, and stay selected.
  page.get('/c/:id/models', async (c) => {
    const id = c.req.param('id');
    const view = await withRequestSignal(c, (signal) => service.listModels(signal));
    const stored = service.getPane(id)?.settings ?? DEFAULT_SETTINGS;
    const choices = Object.fromEntries(
      CHOICE_FIELDS.map((name) => {
        const shown = c.req.query(name);
        return [name, shown === undefined ? stored[name] : shown === '' ? null : shown];
      }),
    ) as ModelChoices;
    c.header('Cache-Control', 'no-store');
    return sendHtml(c, renderModelsUpdate(choices, view));
  });

  // Pull a chat model: Ollama's progress as the page's bar, then the end (the section's lists refresh on
  // `easel:models`). Closing the stream (the page's Cancel) cancels the pull.
  page.post('/c/:id/models/pull', async (c) => {
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const name = typeof body.value.name === 'string' ? body.value.name.trim() : body.value.name;
    const hangup = new AbortController();
    const result = service.pullModel(name, hangup.signal);
    if (!result.ok) return sendHtml(c, renderPullRefused(result.error.fields?.name ?? result.error.message), STATUS[result.error.code]);
    const pulled = String(name);
    return streamEvents<PullEvent>(c, {
      events: result.value,
      hangup,
      logger,
      first: { data: String(renderPullStarted(pulled)) },
      ...(deps.keepAliveMs === undefined ? {} : { keepAliveMs: deps.keepAliveMs }),
      failure: [{ type: 'error', code: 'pull_failed', message: 'Something went wrong inside Easel; the details are in the server log.' }],
      endAfter: (event) => event.type !== 'progress',
      render: (event) => [{ data: String(renderPullEvent(pulled, event)) }, ...(event.type === 'done' ? [MODELS_CHANGED] : [])],
    });
  });

  page.get('/assets/:name', (c) => {
    const asset = assets.get(c.req.param('name'));
    if (!asset) return c.text('Not found', 404);
    c.header('Cache-Control', 'no-cache');
    c.header('ETag', asset.etag);
    if (c.req.header('if-none-match') === asset.etag) return c.body(null, 304);
    c.header('Content-Type', asset.contentType);
    return c.body(asset.body as Uint8Array<ArrayBuffer>);
  });

  return page;
}

/**
 * The pane as the user's action left it, replacing unsaved typing (they asked for it); a refusal (nothing to
 * undo, no suggestion) is said beside the prompt.
 */
function sendPane(c: Context, id: string, result: Result<PaneView>): Response {
  if (result.ok) return sendHtml(c, renderPaneUpdate(id, result.value, { force: true }));
  return sendHtml(c, joinHtml([renderPartial('#prompt-saved', 'innerHTML', html`${result.error.message}`), renderStalePane(id, result)]), STATUS[result.error.code]);
}

/** Closes a page's live stream (hx-sse:close): its conversation was deleted. */
const CLOSED: SseMessage = { event: 'easel:closed', data: '' };

/**
 * The Generate button follows the status line: enabled only when a backend is configured (web/easel.js
 * then disables it again while the prompt is empty).
 */
function renderGenerateState(images: ImageStatus): Html {
  return joinHtml([
    renderPartial('#generate', 'outerMorph', renderGenerateButton(images.configured, false, images.canVary)),
    renderPartial('#vary-help', 'outerMorph', renderVaryHelp(images)),
    renderPartial(
      '#generate-help',
      'innerHTML',
      html`${images.configured ? 'Generate makes an image from this prompt and the settings below.' : renderMessage(images.detail)}`,
    ),
  ]);
}

/** A named SSE event: a pull ended with a new model, and Settings → Models lists it (hx-trigger `easel:models from:body`). */
const MODELS_CHANGED: SseMessage = { event: 'easel:models', data: '' };

function isHtmxRequest(c: Context): boolean {
  return c.req.header('hx-request') === 'true' && c.req.header('hx-history-restore-request') !== 'true';
}

function newBubbleId(): string {
  return `reply-${randomBytes(6).toString('hex')}`;
}

function renderImportStatus(message: string): Html {
  return renderPartial('#import-status', 'innerHTML', html`<span class="composer-error">${message}</span>`);
}

async function* mapStream<T, U>(source: AsyncIterable<T>, map: (item: T) => U): AsyncGenerator<U> {
  for await (const item of source) yield map(item);
}
