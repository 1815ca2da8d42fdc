import { Hono, type Context } from 'hono';
import { toPaneJson } from './pane-json.ts';
import { describeReferenceTypes, isReferenceType, pickMadeWith, thumbnailUrl, type ConversationSummary, type ConversationView, type EaselService, type FeedEntry, type ImageRecord, type LibraryEvent, type LiveEvent, type Logger, type PaneView, type PullEvent, type Result, type TurnEvent } from '../core/index.ts';
import { isPlainObject, readJsonBody, readMediaType, respondError, type JsonBody } from './errors.ts';
import { streamEvents, TURN_STREAM_FAILURE, withRequestSignal } from './stream-events.ts';

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

/** A followed event: its id, its type as the SSE event, the rest as JSON (a library row in the list's own fields). */
function renderEntryJson(entry: FeedEntry<LiveEvent | LibraryEvent>): { id: string; event: string; data: string } {
  const { type, ...data } = entry.event;
  const fields = 'conversation' in data ? { ...data, conversation: toSummaryJson(data.conversation) } : data;
  return { id: entry.id, event: type, data: JSON.stringify(fields) };
}

/** What a pull's stream ends with when Easel itself fails in the middle of it. */
const PULL_STREAM_FAILURE: readonly PullEvent[] = [{ type: 'error', code: 'pull_failed', message: 'Something went wrong inside Easel during the pull; the details are in the server log. Pull again.' }];

/** A pull's event: `progress`, `done` or `error`, the rest as JSON. */
function renderPullJson(event: PullEvent): { event: string; data: string } {
  const { type, ...data } = event;
  return { event: type, data: JSON.stringify(data) };
}

export function createApiRoutes(deps: ApiDeps): Hono {
  const api = new Hono();
  // Stryker disable next-line ConditionalExpression: { keepAliveMs: undefined }: keepAliveMs ?? SSE_KEEP_ALIVE_MS gives the same 15 s
  const keepAlive = deps.keepAliveMs === undefined ? {} : { keepAliveMs: deps.keepAliveMs };

  api.get('/health', async (c) => {
    return c.json(await withRequestSignal(c, (signal) => deps.service.checkHealth(signal)));
  });

  // What Ollama has to chat with and what the image server paints with, asked now.
  api.get('/models', async (c) => {
    return c.json(await withRequestSignal(c, (signal) => deps.service.listModels(signal)));
  });

  // A pull through Ollama, its progress as Ollama streams it; hanging up cancels it.
  api.post('/models/pull', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    const hangup = new AbortController();
    const result = deps.service.pullModel(isPlainObject(body.value) ? body.value.name : undefined, hangup.signal);
    if (!result.ok) return respondError(c, result.error);
    return streamEvents(c, { events: result.value, hangup, logger: deps.logger, render: renderPullJson, endAfter: (event) => event.type !== 'progress', failure: PULL_STREAM_FAILURE, ...keepAlive });
  });

  // The gallery: every conversation's images, newest first, a page at a time (docs/API.md).
  api.get('/images', (c) => {
    const result = deps.service.listGallery(c.req.query());
    if (!result.ok) return respondError(c, result.error);
    return c.json({ images: result.value.images.map(toGalleryImageJson), next: result.value.next });
  });

  // One image goes: its record, its PNG and its thumbnail; its conversation's followers get `image_deleted`.
  api.delete('/images/:id', async (c) => {
    const result = await deps.service.deleteImage(c.req.param('id'));
    return result.ok ? c.body(null, 204) : respondError(c, result.error);
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

  // A reference image (PNG, JPEG or WebP as the body), stored as a PNG image of the conversation: `from` varies from
  // it like any other. The app raises the body limit for this route to the image limit (MAX_REFERENCE_BYTES).
  api.post('/conversations/:id/references', async (c) => {
    const type = readMediaType(c);
    if (!isReferenceType(type)) return c.json({ error: describeReferenceTypes(c.req.header('content-type')) }, 415);
    const added = await deps.service.addReference(c.req.param('id'), new Uint8Array(await c.req.arrayBuffer()), type);
    if (!added.ok) return respondError(c, added.error);
    return c.json({ id: added.value.id, url: added.value.url, width: added.value.width, height: added.value.height }, 201);
  });

  // The vision model checks a stored picture against what was asked: `critique`, then `pane` (its revised prompt
  // waiting as a suggestion), then `done`. Hanging up cancels the check.
  api.post('/conversations/:id/images/:imageId/check', async (c) => {
    const hangup = new AbortController();
    const result = await withRequestSignal(c, (signal) => deps.service.checkImage(c.req.param('id'), c.req.param('imageId'), { signal: AbortSignal.any([signal, hangup.signal]) }));
    if (!result.ok) return respondError(c, result.error);
    return streamEvents(c, { events: result.value, hangup, logger: deps.logger, render: renderEventJson, failure: TURN_STREAM_FAILURE, ...keepAlive });
  });

  // The vision model writes a prompt from a picture (PNG, JPEG or WebP as the body, limited like a reference image):
  // `description`, then `pane` (the new prompt, a version of source `vision`), then `done`.
  api.post('/conversations/:id/describe', async (c) => {
    const type = readMediaType(c);
    if (!isReferenceType(type)) return c.json({ error: describeReferenceTypes(c.req.header('content-type')) }, 415);
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    const hangup = new AbortController();
    const result = await withRequestSignal(c, (signal) => deps.service.describePicture(c.req.param('id'), bytes, type, { signal: AbortSignal.any([signal, hangup.signal]) }));
    if (!result.ok) return respondError(c, result.error);
    return streamEvents(c, { events: result.value, hangup, logger: deps.logger, render: renderEventJson, failure: TURN_STREAM_FAILURE, ...keepAlive });
  });

  api.get('/conversations/:id', (c) => {
    const conversation = deps.service.getConversation(c.req.param('id'));
    if (!conversation) return c.json({ error: 'There is no such conversation. Create one with POST /api/conversations.' }, 404);
    return c.json(toConversationJson(deps.service, conversation));
  });

  // Every change of a conversation as it happens, from any client: a snapshot, then each event with its id.
  // A reconnect with Last-Event-ID resumes after it while the events are kept, else starts with a snapshot.
  api.get('/conversations/:id/events', (c) => {
    const hangup = new AbortController();
    const followed = deps.service.followConversation(c.req.param('id'), { lastEventId: c.req.header('last-event-id'), signal: hangup.signal });
    if (!followed.ok) return respondError(c, followed.error);
    const { snapshot, snapshotId, entries } = followed.value;
    return streamEvents(c, {
      events: entries,
      hangup,
      logger: deps.logger,
      ...(snapshot ? { first: { id: snapshotId, event: 'snapshot', data: JSON.stringify({ conversation: toConversationJson(deps.service, snapshot) }) } } : {}),
      render: renderEntryJson,
      ...keepAlive,
    });
  });

  // The library's list as it changes: created, renamed, updated, deleted (a snapshot of the list first).
  api.get('/events', (c) => {
    const hangup = new AbortController();
    const { snapshot, snapshotId, entries } = deps.service.followLibrary({ lastEventId: c.req.header('last-event-id'), signal: hangup.signal });
    return streamEvents(c, {
      events: entries,
      hangup,
      logger: deps.logger,
      ...(snapshot ? { first: { id: snapshotId, event: 'snapshot', data: JSON.stringify({ conversations: snapshot.map(toSummaryJson) }) } } : {}),
      render: renderEntryJson,
      ...keepAlive,
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
    return streamEvents(c, { events: result.value, hangup, logger: deps.logger, render: renderEventJson, failure: TURN_STREAM_FAILURE, ...keepAlive });
  });

  api.put('/conversations/:id/prompt', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    if (!isPlainObject(body.value) || !('prompt' in body.value)) {
      return c.json({ error: 'Send {"prompt": "…"}.', fields: { prompt: 'prompt is required.' } }, 422);
    }
    const result = deps.service.setPrompt(c.req.param('id'), body.value.prompt, { baseRevision: body.value.baseRevision });
    return result.ok ? c.json({ prompt: result.value.prompt, promptVersion: result.value.promptVersion, paneRevision: result.value.paneRevision }) : respondError(c, result.error);
  });

  // Undo and redo move through the prompt's versions; the answer is the pane as it now stands. The body is
  // optional: {"baseRevision": n}.
  api.post('/conversations/:id/prompt/undo', async (c) => {
    const body = await readOptionalJsonBody(c);
    if (!body.ok) return body.response;
    return answerPane(c, deps.service.undoPrompt(c.req.param('id'), { baseRevision: readField(body.value, 'baseRevision') }));
  });
  api.post('/conversations/:id/prompt/redo', async (c) => {
    const body = await readOptionalJsonBody(c);
    if (!body.ok) return body.response;
    return answerPane(c, deps.service.redoPrompt(c.req.param('id'), { baseRevision: readField(body.value, 'baseRevision') }));
  });

  // "Use suggestion" ({"accept": true}) or "Keep mine" ({"accept": false}).
  api.post('/conversations/:id/suggestion', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    const accept = isPlainObject(body.value) ? body.value.accept : undefined;
    return answerPane(c, deps.service.answerSuggestion(c.req.param('id'), accept, { baseRevision: readField(body.value, 'baseRevision') }));
  });

  // "This one" under a comparison: {"promptVersion": the chosen, "over": the other}; the answer is the pane.
  api.post('/conversations/:id/compare/pick', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    const fields = isPlainObject(body.value) ? body.value : {};
    return answerPane(c, deps.service.pickComparedPrompt(c.req.param('id'), fields['promptVersion'], fields['over'], { baseRevision: fields['baseRevision'] }));
  });

  api.put('/conversations/:id/settings', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    // baseRevision goes beside the settings, not into them.
    const { baseRevision, ...patch } = isPlainObject(body.value) ? body.value : { baseRevision: undefined };
    const values = isPlainObject(body.value) ? patch : body.value;
    await withRequestSignal(c, (signal) => deps.service.prepareModelChoice(values, signal));
    const result = deps.service.setSettings(c.req.param('id'), values, { baseRevision });
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
    const result = deps.service.sendMessage(c.req.param('id'), body.value.text, hangup.signal, { replaceLast: replaceLast === true, baseRevision: body.value.baseRevision });
    if (!result.ok) return respondError(c, result.error);
    return streamEvents(c, { events: result.value, hangup, logger: deps.logger, render: renderEventJson, failure: TURN_STREAM_FAILURE, ...keepAlive });
  });

  api.post('/conversations/:id/generations', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    if (!isPlainObject(body.value)) return c.json({ error: 'Send a JSON object, e.g. {} or {"prompt": "…", "settings": {"steps": 30}}.' }, 422);
    const { prompt, settings, baseRevision, from, count, promptVersions, fix } = body.value;
    const hangup = new AbortController();
    await withRequestSignal(c, (signal) => deps.service.prepareModelChoice(settings, signal));
    const result = deps.service.generate(c.req.param('id'), { prompt, settings, from, count, promptVersions, fix }, hangup.signal, { baseRevision });
    if (!result.ok) return respondError(c, result.error);
    return streamEvents(c, { events: result.value, hangup, logger: deps.logger, render: renderEventJson, failure: TURN_STREAM_FAILURE, ...keepAlive });
  });

  // Follows an image being made (an automatic one keeps going after its reply's stream is closed).
  // `?skip=<id>,<id>…`: images the client has already (e.g. from GET the conversation), not replayed.
  api.get('/conversations/:id/generations/:imageId/events', (c) => {
    const skip = c.req.query('skip');
    const options = skip === undefined ? {} : { skipImages: skip.split(',').slice(0, 1000) };
    const result = deps.service.followImage(c.req.param('id'), c.req.param('imageId'), options);
    if (!result.ok) return respondError(c, result.error);
    // Following never cancels: hanging up only stops the reading.
    return streamEvents(c, { events: result.value, hangup: new AbortController(), logger: deps.logger, render: renderEventJson, failure: TURN_STREAM_FAILURE, ...keepAlive });
  });

  // Ends the vision model's checks and descriptions in flight (and so the check-and-correct loop); images go on.
  api.post('/conversations/:id/checks/cancel', (c) => {
    if (!deps.service.getSummary(c.req.param('id'))) return c.json({ error: 'There is no such conversation.' }, 404);
    return c.json({ cancelled: deps.service.cancelChecks(c.req.param('id')) });
  });

  // Cancels the images being made; a reply being written goes on.
  api.post('/conversations/:id/images/cancel', (c) => {
    const id = c.req.param('id');
    if (!deps.service.getConversation(id)) return c.json({ error: 'There is no such conversation.' }, 404);
    return c.json({ cancelled: deps.service.cancelImages(id) });
  });

  // Cancels one image (a batch: all of it), waiting or being made; the others go on.
  api.post('/conversations/:id/generations/:imageId/cancel', (c) => {
    const id = c.req.param('id');
    if (!deps.service.getConversation(id)) return c.json({ error: 'There is no such conversation.' }, 404);
    return c.json({ cancelled: deps.service.cancelImage(id, c.req.param('imageId')) });
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


function toSummaryJson(summary: ConversationSummary) {
  const { id, title, createdAt, updatedAt, preview } = summary;
  return { id, title, createdAt, updatedAt, preview };
}

/** null: the backend ignored that setting and did not say what it used, so Easel claims nothing. */
function toImageJson(image: ImageRecord) {
  const { id, url, promptVersion, source, compareSide, createdAt } = image;
  // `compareSide` only for a comparison's image: its side, `a` or `b`.
  return { id, url, ...pickMadeWith(image), promptVersion, source, ...(compareSide === null ? {} : { compareSide }), createdAt };
}

/** An image as the gallery lists it: where it is, its thumbnail, and what it was made with. */
function toGalleryImageJson(image: ImageRecord) {
  const { id, conversationId, url, prompt, seed, width, height, model, sampler, scheduler, source, createdAt } = image;
  // `source` only for a variation, as the issue's shape has it (`"source"?`).
  return { id, conversationId, url, thumbnailUrl: thumbnailUrl(id), prompt, seed, width, height, model, sampler, scheduler, createdAt, ...(source === null ? {} : { source }) };
}

/** A body that may be left out (undo, redo): none is an empty object; one that is sent must be JSON. */
async function readOptionalJsonBody(c: Context): Promise<JsonBody> {
  if (c.req.header('content-type') === undefined && (c.req.header('content-length') ?? '0') === '0') return { ok: true, value: {} };
  return readJsonBody(c);
}

function readField(value: unknown, key: string): unknown {
  return isPlainObject(value) ? value[key] : undefined;
}

/** A conversation as GET /api/conversations/:id answers it, and as a `snapshot` event carries it. */
function toConversationJson(service: EaselService, conversation: ConversationView) {
  return {
    id: conversation.id,
    title: conversation.title,
    createdAt: conversation.createdAt,
    updatedAt: conversation.updatedAt,
    busy: service.isBusy(conversation.id),
    // prompt and settings first, as before; then the rest of the pane.
    ...toPaneJson(conversation.pane),
    // Stryker disable next-line ArrayDeclaration: the conversation was found just before in the same synchronous handler, so its versions are never undefined
    promptVersions: service.listPromptVersions(conversation.id) ?? [],
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
    // What the vision model found in its pictures (Check), oldest first.
    checks: conversation.checks.map(({ id, imageId, model, matches, misses, revisedPrompt, createdAt }) => ({ id, imageId, model, matches, misses, revisedPrompt, createdAt })),
    imagesInProgress: conversation.generating,
  };
}
