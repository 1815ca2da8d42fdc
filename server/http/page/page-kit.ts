// What the page's routes share: answering with HTML and streaming a turn's events as HTML, and each open page's
// own work (what it asked for itself, so its live view does not draw it twice; the pane revisions it made).
import { randomBytes } from 'node:crypto';
import type { Context } from 'hono';
import { streamEvents, TURN_STREAM_FAILURE, type SseMessage } from '../stream-events.ts';
import type { EaselService, Logger, PaneView, TurnEvent } from '../../core/index.ts';
import type { ChatHead } from './library.ts';
import { EMPTY, joinHtml, renderPartial, type Html } from './markup.ts';
import { renderPaneUpdate } from './pane.ts';
import { createOwnWork, noteOwnRevisions, skipOwnRevisions, type OwnWork } from './live-view.ts';
import { renderEventHtml, type StreamView } from './render-event.ts';
import { createSendGuard, type SendGuard } from './send-guard.ts';
import { renderLiveStream } from './views.ts';

/** Each open page's own work, and the changes it makes, kept for the routes of every concern. */
export interface PageContext {
  ownWorkOf(viewId: unknown): OwnWork;
  /**
   * A change from a page: checked against the revision it was made from, moved past the page's own earlier
   * changes, and the revisions it makes remembered as its own.
   */
  changeFromPage<T>(id: string, form: Record<string, unknown>, run: (baseRevision: unknown) => T): T;
  /** The empty page's live view, once its conversation exists (`mine`: what this page draws on its own request). */
  renderGoLive(id: string, mine: (own: OwnWork) => void): Html;
  /** The pane as stored now, after a request of this page saved what it showed. */
  renderOwnPane(id: string): Html;
  headOf(id: string): ChatHead | undefined;
  /** Each message and each Generate is taken once, by its send key (a double click, a resent form). */
  sends: SendGuard;
}

export function createPageContext(service: EaselService): PageContext {
  // What each open page asked for itself (by its view id), so its live stream does not draw it twice.
  const ownWork = new Map<string, OwnWork>();
  function ownWorkOf(viewId: unknown): OwnWork {
    if (typeof viewId !== 'string' || !/^[a-f0-9]{16}$/.test(viewId)) return createOwnWork();
    let own = ownWork.get(viewId);
    if (!own) {
      own = createOwnWork();
      ownWork.set(viewId, own);
      // The oldest pages' records go first: a page open for days reconnects with a fresh one.
      // Stryker disable next-line EqualityOperator: memory only
      if (ownWork.size > MAX_VIEWS) ownWork.delete(ownWork.keys().next().value as string);
    }
    return own;
  }

  /**
   * A change from a page: checked against the revision it was made from, moved past the page's own earlier
   * changes (two saves sent at once are not stale for each other), and the revisions it makes remembered as its own.
   */
  function changeFromPage<T>(id: string, form: Record<string, unknown>, run: (baseRevision: unknown) => T): T {
    const change = beginChange(id, form);
    const result = run(change.baseRevision);
    change.end();
    return result;
  }

  /** The revision a change from a page is made from, and, once it is made, the revisions it made noted as the page's own. */
  function beginChange(id: string, form: Record<string, unknown>): { baseRevision: unknown; end(): void } {
    const own = ownWorkOf(form.viewId);
    const before = service.getPane(id)?.paneRevision;
    const base = readRevision(form.baseRevision);
    return {
      baseRevision: typeof base === 'number' && before !== undefined ? skipOwnRevisions(own, id, base, before) : base,
      end() {
        const after = service.getPane(id)?.paneRevision;
        if (before !== undefined && after !== undefined) noteOwnRevisions(own, id, before, after);
      },
    };
  }

  /**
   * The empty page's live view, once its conversation exists: #live follows it from now on, under a new view id
   * whose own work (`mine`) is what this page is drawing on its own request.
   */
  function renderGoLive(id: string, mine: (own: OwnWork) => void): Html {
    const snapshot = service.snapshotConversation(id);
    if (!snapshot) return EMPTY;
    const viewId = randomBytes(8).toString('hex');
    mine(ownWorkOf(viewId));
    return renderPartial('#live', 'outerHTML', renderLiveStream(id, { snapshotId: snapshot.snapshotId, viewId }, snapshot.view.pane.paneRevision));
  }

  /** The pane as stored now, after a request of this page saved what it showed (not forced: typing since stays). */
  function renderOwnPane(id: string): Html {
    const pane = service.getPane(id);
    return pane ? renderPaneUpdate(id, pane) : EMPTY;
  }

  function headOf(id: string): ChatHead | undefined {
    const summary = service.getSummary(id);
    return summary ? { id, title: summary.title, isNew: false, imageCount: 0 } : undefined;
  }

  return { ownWorkOf, changeFromPage, renderGoLive, renderOwnPane, headOf, sends: createSendGuard() };
}

/** A change made from an older pane: the newer one is shown, and what the user is typing stays (not forced). */
export function renderStalePane(id: string, result: { ok: false; error: { code: string; pane?: PaneView } }): Html {
  return result.error.code === 'stale' && result.error.pane ? renderPaneUpdate(id, result.error.pane) : EMPTY;
}

/** The pane revision a form was made from: a whole number, or absent (no check). Anything else is passed on to be refused. */
function readRevision(value: unknown): unknown {
  if (value === undefined || value === '') return undefined;
  return typeof value === 'string' && /^\d{1,15}$/.test(value) ? Number(value) : value;
}

/** How many open pages' own requests are remembered. */
const MAX_VIEWS = 1000;

/** A named SSE event: htmx triggers `easel:list` on the stream's source, and the sidebar's list refreshes. */
export const LIST_CHANGED: SseMessage = { event: 'easel:list', data: '' };

export function sendHtml(c: Context, body: Html, status: 200 | 201 | 400 | 404 | 409 | 413 | 422 | 503 = 200): Response {
  return c.html(String(body), status);
}

export interface HtmlStream {
  first?: Html | readonly SseMessage[];
  events: AsyncIterable<TurnEvent>;
  view: StreamView;
  /** More to draw after an event (the empty page's live view, once its first message made the conversation). */
  after?: (event: TurnEvent) => Html;
  /** Aborted when the client hangs up. */
  hangup: AbortController;
  logger: Logger;
  keepAliveMs: number | undefined;
  /** Events this stream does not show (a follower's `generation`: its block is on the page already). */
  skip?: (event: TurnEvent) => boolean;
}

/**
 * Streams a turn's events as SSE messages of HTML, exactly like the API streams JSON: a client that
 * hangs up aborts the work at once, and writes after a disconnect are skipped.
 */
export function streamHtml(c: Context, { first, events, view, hangup, logger, keepAliveMs, skip, after }: HtmlStream): Response {
  return streamEvents(c, {
    events,
    hangup,
    logger,
    failure: TURN_STREAM_FAILURE,
    // Stryker disable next-line ConditionalExpression: { keepAliveMs: undefined }: streamEvents reads it as ?? SSE_KEEP_ALIVE_MS
    ...(keepAliveMs === undefined ? {} : { keepAliveMs }),
    ...(first ? { first: Array.isArray(first) ? first : { data: String(first) } } : {}),
    // The reply is over and its image has its block (which follows it on a stream of its own): the page's
    // request ends here, so the composer, the typing dots and Stop are free while the picture is made.
    endAfter: (event) => event.type === 'generation' && view.replied === true,
    onEvent(event) {
      if (event.type === 'started') view.started = true;
      if (event.type === 'done' && view.bubbleId) view.replied = true;
      if (event.type !== 'generation') return;
      // Stryker disable next-line BooleanLiteral: a message's stream ends at its generation event (after done), so no image error follows in it
      view.imageStarted = true;
      view.generationId = event.id;
    },
    render(event) {
      if (skip?.(event)) return [];
      const fragment = String(joinHtml([renderEventHtml(event, view), after?.(event) ?? EMPTY]));
      view.statusShown = event.type === 'status';
      const message = fragment === '' ? [] : [{ data: fragment }];
      // The turn is stored: the sidebar reorders (and shows a new conversation), by a named SSE event that
      // htmx dispatches on the page.
      return event.type === 'started' ? [...message, LIST_CHANGED] : message;
    },
  });
}
