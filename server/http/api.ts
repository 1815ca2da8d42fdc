import { Hono, type Context } from 'hono';
import { pickMadeWith, type ConversationSummary, type EaselService, type ImageRecord, type Logger, type PaneView, type Result, type TurnEvent } from '../core/index.ts';
import { isPlainObject, readJsonBody, readMediaType, respondError } from './errors.ts';
import { streamEvents, withRequestSignal } from './stream-events.ts';

export interface ApiDeps {
  service: EaselService;
  logger: Logger;
  /** Quiet time before an SSE keep-alive comment (default 15 s); tests shorten it. */
  keepAliveMs?: number;
}

/** The JSON renderer of a turn's events: one SSE event per TurnEvent, `event:` = type, `data:` = the JSON. */
export function renderEventJson(event: TurnEvent): { event: string; data: string } {
  const { type, ...data } = event;
  return { event: type, data: JSON.stringify(data) };
}

export function createApiRoutes(deps: ApiDeps): Hono {
  const api = new Hono();
  const keepAlive = deps.keepAliveMs === undefined ? {} : { keepAliveMs: deps.keepAliveMs };

  api.get('/health', async (c) => {
    return c.json(await withRequestSignal(c, (signal) => deps.service.checkHealth(signal)));
  });

  api.get('/conversations', (c) => {
    const query = c.req.query('q');
    return c.json({ conversations: deps.service.listConversations(query).map(toSummaryJson) });
  });

  api.post('/conversations', (c) => {
    const created = deps.service.createConversation();
    return created.ok ? c.json({ id: created.value.id }, 201) : respondError(c, created.error);
  });

  // The body is the zip itself; the app raises the body limit for this route alone (MAX_IMPORT_BYTES).
  api.post('/conversations/import', async (c) => {
    const type = readMediaType(c);
    if (type !== 'application/zip' && type !== 'application/x-zip-compressed') {
      const sent = c.req.header('content-type');
      return c.json({ error: `Send the .zip made by Export as the body, with Content-Type: application/zip (this body ${sent ? `was sent as "${sent}"` : 'has no Content-Type'}).` }, 415);
    }
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    const imported = await deps.service.importConversation(bytes);
    return imported.ok ? c.json({ id: imported.value.id }, 201) : respondError(c, imported.error);
  });

  api.get('/conversations/:id', (c) => {
    const conversation = deps.service.getConversation(c.req.param('id'));
    if (!conversation) return c.json({ error: 'There is no such conversation. Create one with POST /api/conversations.' }, 404);
    return c.json({
      id: conversation.id,
      title: conversation.title,
      createdAt: conversation.createdAt,
      updatedAt: conversation.updatedAt,
      busy: deps.service.isBusy(conversation.id),
      // prompt and settings first, as before; then the rest of the pane.
      ...toPaneJson(conversation.pane),
      promptVersions: deps.service.listPromptVersions(conversation.id) ?? [],
      turns: conversation.turns.map((turn) => ({
        id: turn.id,
        role: turn.role,
        text: turn.text,
        status: turn.status,
        ...(turn.metadata ? { metadata: turn.metadata } : {}),
        ...(turn.error ? { error: turn.error } : {}),
        ...(turn.notices ? { notices: turn.notices } : {}),
        ...(turn.imageNote ? { imageNotMade: turn.imageNote } : {}),
        ...(turn.images.length > 0 ? { images: turn.images.map(toImageJson) } : {}),
        createdAt: turn.createdAt,
      })),
      // Every image, also those of the Generate button (they belong to no turn), oldest first.
      images: conversation.images.map(toImageJson),
      imagesInProgress: conversation.generating,
    });
  });

  api.patch('/conversations/:id', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    if (!isPlainObject(body.value) || !('title' in body.value)) {
      return c.json({ error: 'Send {"title": "…"} ("" gives it back its title from the first message).', fields: { title: 'title is required.' } }, 422);
    }
    const result = deps.service.renameConversation(c.req.param('id'), body.value.title);
    return result.ok ? c.json(toSummaryJson(result.value)) : respondError(c, result.error);
  });

  api.delete('/conversations/:id', async (c) => {
    const result = await deps.service.deleteConversation(c.req.param('id'));
    return result.ok ? c.body(null, 204) : respondError(c, result.error);
  });

  api.get('/conversations/:id/export', async (c) => {
    const result = await deps.service.exportConversation(c.req.param('id'));
    if (!result.ok) return respondError(c, result.error);
    return c.body(result.value.bytes as Uint8Array<ArrayBuffer>, 200, {
      'content-type': 'application/zip',
      'content-disposition': `attachment; filename="${result.value.fileName}"`,
      'cache-control': 'no-store',
    });
  });

  api.post('/conversations/:id/regenerate', (c) => {
    const hangup = new AbortController();
    const result = deps.service.regenerate(c.req.param('id'), hangup.signal);
    if (!result.ok) return respondError(c, result.error);
    return streamEvents(c, { events: result.value, hangup, logger: deps.logger, render: renderEventJson, ...keepAlive });
  });

  api.put('/conversations/:id/prompt', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    if (!isPlainObject(body.value) || !('prompt' in body.value)) {
      return c.json({ error: 'Send {"prompt": "…"}.', fields: { prompt: 'prompt is required.' } }, 422);
    }
    const result = deps.service.setPrompt(c.req.param('id'), body.value.prompt);
    return result.ok ? c.json({ prompt: result.value.prompt, promptVersion: result.value.promptVersion }) : respondError(c, result.error);
  });

  // Undo and redo move through the prompt's versions; the answer is the pane as it now stands.
  api.post('/conversations/:id/prompt/undo', (c) => answerPane(c, deps.service.undoPrompt(c.req.param('id'))));
  api.post('/conversations/:id/prompt/redo', (c) => answerPane(c, deps.service.redoPrompt(c.req.param('id'))));

  // "Use suggestion" ({"accept": true}) or "Keep mine" ({"accept": false}).
  api.post('/conversations/:id/suggestion', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    const accept = isPlainObject(body.value) ? body.value.accept : undefined;
    return answerPane(c, deps.service.answerSuggestion(c.req.param('id'), accept));
  });

  api.put('/conversations/:id/settings', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    const result = deps.service.setSettings(c.req.param('id'), body.value);
    return result.ok ? c.json(result.value) : respondError(c, result.error);
  });

  api.post('/conversations/:id/messages', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    if (!isPlainObject(body.value)) return c.json({ error: 'Send {"text": "…"}.', fields: { text: 'text is required.' } }, 422);
    const { replaceLast } = body.value;
    if (replaceLast !== undefined && typeof replaceLast !== 'boolean') {
      return c.json({ error: 'replaceLast must be true or false.', fields: { replaceLast: 'replaceLast must be true or false.' } }, 422);
    }
    const hangup = new AbortController();
    const result = deps.service.sendMessage(c.req.param('id'), body.value.text, hangup.signal, { replaceLast: replaceLast === true });
    if (!result.ok) return respondError(c, result.error);
    return streamEvents(c, { events: result.value, hangup, logger: deps.logger, render: renderEventJson, ...keepAlive });
  });

  api.post('/conversations/:id/generations', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    if (!isPlainObject(body.value)) return c.json({ error: 'Send a JSON object, e.g. {} or {"prompt": "…", "settings": {"steps": 30}}.' }, 422);
    const hangup = new AbortController();
    const result = deps.service.generate(c.req.param('id'), { prompt: body.value.prompt, settings: body.value.settings }, hangup.signal);
    if (!result.ok) return respondError(c, result.error);
    return streamEvents(c, { events: result.value, hangup, logger: deps.logger, render: renderEventJson, ...keepAlive });
  });

  // Follows an image being made (an automatic one keeps going after its reply's stream is closed).
  api.get('/conversations/:id/generations/:imageId/events', (c) => {
    const result = deps.service.followImage(c.req.param('id'), c.req.param('imageId'));
    if (!result.ok) return respondError(c, result.error);
    // Following never cancels: hanging up only stops the reading.
    return streamEvents(c, { events: result.value, hangup: new AbortController(), logger: deps.logger, render: renderEventJson, ...keepAlive });
  });

  // Cancels the images being made; a reply being written goes on.
  api.post('/conversations/:id/images/cancel', (c) => {
    const id = c.req.param('id');
    if (!deps.service.getConversation(id)) return c.json({ error: 'There is no such conversation.' }, 404);
    return c.json({ cancelled: deps.service.cancelImages(id) });
  });

  api.post('/conversations/:id/stop', (c) => {
    const id = c.req.param('id');
    if (!deps.service.getConversation(id)) return c.json({ error: 'There is no such conversation.' }, 404);
    return c.json({ stopped: deps.service.stop(id) });
  });

  return api;
}

function answerPane(c: Context, result: Result<PaneView>): Response {
  return result.ok ? c.json(toPaneJson(result.value)) : respondError(c, result.error);
}

/** The prompt pane and settings as stored: the same fields as the `pane` event. */
function toPaneJson(pane: PaneView) {
  const { paneRevision, prompt, promptVersion, canUndo, canRedo, suggestion, settings, pinned, settingSuggestions } = pane;
  return { paneRevision, prompt, promptVersion, canUndo, canRedo, suggestion, settings, pinned, settingSuggestions };
}

function toSummaryJson(summary: ConversationSummary) {
  const { id, title, createdAt, updatedAt, preview } = summary;
  return { id, title, createdAt, updatedAt, preview };
}

/** null: the backend ignored that setting and did not say what it used, so Easel claims nothing. */
function toImageJson(image: ImageRecord) {
  const { id, url, promptVersion, createdAt } = image;
  return { id, url, ...pickMadeWith(image), promptVersion, createdAt };
}
