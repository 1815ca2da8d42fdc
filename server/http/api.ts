import { Hono } from 'hono';
import type { EaselService, ImageRecord, Logger, TurnEvent } from '../core/index.ts';
import { isPlainObject, readJsonBody, respondError } from './errors.ts';
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

  api.post('/conversations', (c) => {
    const conversation = deps.service.createConversation();
    return c.json({ id: conversation.id }, 201);
  });

  api.get('/conversations/:id', (c) => {
    const conversation = deps.service.getConversation(c.req.param('id'));
    if (!conversation) return c.json({ error: 'There is no such conversation. Create one with POST /api/conversations.' }, 404);
    return c.json({
      id: conversation.id,
      prompt: conversation.prompt,
      settings: conversation.settings,
      busy: deps.service.isBusy(conversation.id),
      turns: conversation.turns.map((turn) => ({
        id: turn.id,
        role: turn.role,
        text: turn.text,
        status: turn.status,
        ...(turn.metadata ? { metadata: turn.metadata } : {}),
        ...(turn.error ? { error: turn.error } : {}),
        ...(turn.images.length > 0 ? { images: turn.images.map(toImageJson) } : {}),
        createdAt: turn.createdAt,
      })),
      // Every image, also those of the Generate button (they belong to no turn), oldest first.
      images: conversation.images.map(toImageJson),
    });
  });

  api.put('/conversations/:id/prompt', async (c) => {
    const body = await readJsonBody(c);
    if (!body.ok) return body.response;
    if (!isPlainObject(body.value) || !('prompt' in body.value)) {
      return c.json({ error: 'Send {"prompt": "…"}.', fields: { prompt: 'prompt is required.' } }, 422);
    }
    const result = deps.service.setPrompt(c.req.param('id'), body.value.prompt);
    return result.ok ? c.json({ prompt: result.value }) : respondError(c, result.error);
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
    const hangup = new AbortController();
    const result = deps.service.sendMessage(c.req.param('id'), body.value.text, hangup.signal);
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

  api.post('/conversations/:id/stop', (c) => {
    const id = c.req.param('id');
    if (!deps.service.getConversation(id)) return c.json({ error: 'There is no such conversation.' }, 404);
    return c.json({ stopped: deps.service.stop(id) });
  });

  return api;
}

/** null: the backend ignored that setting and did not say what it used, so Easel claims nothing. */
function toImageJson(image: ImageRecord) {
  const { id, url, seed, width, height, prompt, negativePrompt, steps, cfg, sampler, model, createdAt } = image;
  return { id, url, seed, width, height, prompt, negativePrompt, steps, cfg, sampler, model, createdAt };
}
