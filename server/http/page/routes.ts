import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import { Hono } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { readFormBody, refuseNonFormBody, STATUS } from '../errors.ts';
import { streamEvents, withRequestSignal } from '../stream-events.ts';
import type { EaselService, Logger, TurnEvent } from '../../core/index.ts';
import { loadAssets } from './assets.ts';
import { conversationPath } from './bubbles.ts';
import { html, joinHtml, renderMessage, renderPartial, type Html } from './markup.ts';
import { renderEventHtml, renderImageError, renderTurnStart, type StreamView } from './render-event.ts';
import { createSendGuard, isSendKey } from './send-guard.ts';
import { readSettingsForm } from './settings-form.ts';
import {
  renderComposerStatus,
  renderConversationPage,
  renderMissingPage,
  renderPromptSaved,
  renderSettingsSaved,
  renderStatus,
  type ImageStatus,
} from './views.ts';

export interface PageDeps {
  service: EaselService;
  logger: Logger;
  /** Overrides the image backend's state shown in the status line (default: the service's health check). */
  imageStatus?: () => Promise<ImageStatus & { reachable?: boolean }>;
  /** Quiet time before an SSE keep-alive comment (default 15 s); tests shorten it. */
  keepAliveMs?: number;
}

const LAST_CONVERSATION_COOKIE = 'easel_conversation';


/** The web page: server-rendered HTML, htmx fragments and SSE streams of HTML, and its assets. */
export function createPageRoutes(deps: PageDeps): Hono {
  const { service, logger } = deps;
  const page = new Hono();
  const assets = loadAssets();
  const sends = createSendGuard();
  const findImage = (conversationId: string) => (imageId: string) =>
    service.getConversation(conversationId)?.images.find((image) => image.id === imageId);

  // The page's writes (all under /c) are htmx form posts; anything else (JSON, text/plain) was not sent
  // by the page. Not '*': mounted at '/', that would reach the API's unknown routes too.
  page.use('/c/*', async (c, next) => {
    if (c.req.method === 'GET' || c.req.method === 'HEAD') return next();
    const refused = refuseNonFormBody(c);
    return refused ?? next();
  });

  page.get('/', (c) => {
    const last = getCookie(c, LAST_CONVERSATION_COOKIE);
    const existing = last ? service.getConversation(last) : undefined;
    if (existing) return c.redirect(conversationPath(existing.id), 303);
    const created = service.createConversation();
    if (!created.ok) return c.text(created.error.message, 503);
    return c.redirect(conversationPath(created.value.id), 303);
  });

  page.post('/c', (c) => {
    const created = service.createConversation();
    return created.ok ? c.redirect(conversationPath(created.value.id), 303) : c.text(created.error.message, 503);
  });

  page.get('/c/:id', (c) => {
    const conversation = service.getConversation(c.req.param('id'));
    if (!conversation) return sendHtml(c, renderMissingPage(), 404);
    setCookie(c, LAST_CONVERSATION_COOKIE, conversation.id, { path: '/', httpOnly: true, sameSite: 'Strict', maxAge: 60 * 60 * 24 * 365 });
    c.header('Cache-Control', 'no-store');
    return sendHtml(c, renderConversationPage(conversation, { configured: false, detail: 'Checking the image backend…' }));
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
    const conversation = service.getConversation(id);
    if (!conversation) return sendHtml(c, renderComposerStatus('This conversation no longer exists. Start a new one.'), 404);
    // An unsaved prompt edit travels with the message, so the model hears of it in this very turn.
    if (typeof form.prompt === 'string' && form.prompt !== conversation.prompt) {
      const saved = service.setPrompt(id, form.prompt);
      if (!saved.ok) {
        return sendHtml(c, joinHtml([renderPromptSaved(saved.error.message), renderComposerStatus('Not sent: fix the prompt first.')]), 422);
      }
    }
    const hangup = new AbortController();
    const result = service.sendMessage(id, form.text, hangup.signal);
    if (!result.ok) return sendHtml(c, renderComposerStatus(result.error.fields?.text ?? result.error.message), STATUS[result.error.code]);
    const view = { conversationId: id, bubbleId: `reply-${randomBytes(6).toString('hex')}`, userText: String(form.text).trim(), findImage: findImage(id) };
    return streamHtml(c, { first: renderTurnStart(view), events: result.value, view, hangup, logger, keepAliveMs: deps.keepAliveMs });
  });

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
    // The prompt and settings on screen, even an edit whose save has not arrived yet.
    const hasSettings = 'steps' in form || 'negativePrompt' in form;
    const overrides = {
      ...(typeof form.prompt === 'string' ? { prompt: form.prompt } : {}),
      ...(hasSettings ? { settings: readSettingsForm(form) } : {}),
    };
    const result = service.generate(id, overrides, hangup.signal);
    if (!result.ok) {
      return sendHtml(c, renderPartial('#image-error', 'innerHTML', renderImageError(result.error.message)), STATUS[result.error.code]);
    }
    const view: StreamView = { conversationId: id, imageStarted: true, findImage: findImage(id) };
    return streamHtml(c, { events: result.value, view, hangup, logger, keepAliveMs: deps.keepAliveMs });
  });

  page.post('/c/:id/stop', (c) => {
    service.stop(c.req.param('id'));
    return c.body(null, 204);
  });

  // Cancel stops only the images: a reply being written at the same time goes on.
  page.post('/c/:id/images/cancel', (c) => {
    service.cancelImages(c.req.param('id'));
    return c.body(null, 204);
  });

  page.put('/c/:id/prompt', async (c) => {
    const id = c.req.param('id');
    const conversation = service.getConversation(id);
    if (!conversation) return sendHtml(c, renderPromptSaved('This conversation no longer exists. Start a new one.'), 404);
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const form = body.value;
    // Saving what is already stored would tell the model about an edit nobody made.
    if (form.prompt === conversation.prompt) return sendHtml(c, renderPromptSaved(undefined));
    const result = service.setPrompt(id, form.prompt);
    return result.ok ? sendHtml(c, renderPromptSaved(undefined)) : sendHtml(c, renderPromptSaved(result.error.message), STATUS[result.error.code]);
  });

  page.put('/c/:id/settings', async (c) => {
    const body = await readFormBody(c);
    if (!body.ok) return body.response;
    const form = body.value;
    const result = service.setSettings(c.req.param('id'), readSettingsForm(form));
    if (result.ok) return sendHtml(c, renderSettingsSaved({}, 'Saved.'));
    const summary = result.error.code === 'invalid' ? 'Not saved: fix the marked field.' : result.error.message;
    return sendHtml(c, renderSettingsSaved(result.error.fields ?? {}, summary), STATUS[result.error.code]);
  });

  page.get('/status', async (c) => {
    const health = await withRequestSignal(c, (signal) => service.checkHealth(signal));
    const images = deps.imageStatus ? await deps.imageStatus() : health.images;
    return sendHtml(c, joinHtml([renderStatus(health.ollama, images), renderGenerateState(images)]));
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

/** The Generate button follows the status line: enabled only when a backend is configured. */
function renderGenerateState(images: ImageStatus): Html {
  return joinHtml([
    renderPartial(
      '#generate',
      'outerMorph',
      images.configured
        ? html`<button type="submit" id="generate" class="primary" aria-describedby="generate-help">Generate</button>`
        : html`<button type="submit" id="generate" class="primary" aria-describedby="generate-help" disabled>Generate</button>`,
    ),
    renderPartial(
      '#generate-help',
      'innerHTML',
      html`${images.configured ? 'Generate makes an image from this prompt and the settings below.' : renderMessage(images.detail)}`,
    ),
  ]);
}

function sendHtml(c: Context, body: Html, status: 200 | 400 | 404 | 409 | 413 | 422 | 503 = 200): Response {
  return c.html(String(body), status);
}

interface HtmlStream {
  first?: Html;
  events: AsyncIterable<TurnEvent>;
  view: StreamView;
  /** Aborted when the client hangs up. */
  hangup: AbortController;
  logger: Logger;
  keepAliveMs: number | undefined;
}

/**
 * Streams a turn's events as SSE messages of HTML, exactly like the API streams JSON: a client that
 * hangs up aborts the work at once, and writes after a disconnect are skipped.
 */
function streamHtml(c: Context, { first, events, view, hangup, logger, keepAliveMs }: HtmlStream): Response {
  return streamEvents(c, {
    events,
    hangup,
    logger,
    ...(keepAliveMs === undefined ? {} : { keepAliveMs }),
    ...(first ? { first: { data: String(first) } } : {}),
    onEvent(event) {
      if (event.type !== 'generation') return;
      view.imageStarted = true;
      view.generationId = event.id;
    },
    render(event) {
      const fragment = String(renderEventHtml(event, view));
      view.statusShown = event.type === 'status';
      return fragment === '' ? undefined : { data: fragment };
    },
  });
}
