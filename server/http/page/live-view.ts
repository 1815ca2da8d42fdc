// A page's live view of one conversation: every change from any tab or client, as HTML partials. The turns
// and images this page asked for itself come on its own requests' streams and are not drawn twice; everything
// else (a reply sent from another tab, a reply still running when this page loaded, another tab's Generate, the
// pane, the title) is drawn here with the same renderer as the sender's stream.
import { isImageId, type EaselService, type LiveEvent, type TurnEvent } from '../../core/index.ts';
import { describeBubble, describeCritique, renderImage as renderFramedImage, renderNoImage, renderStreamingText } from './bubbles.ts';
import { renderRenameInput } from './library.ts';
import { EMPTY, html, joinHtml, renderPartial, type Html } from './markup.ts';
import { renderPaneUpdate } from './pane.ts';
import { isLastImage, renderCheckFailedShown, renderCheckStarted, renderCritiqueShown, renderEventHtml, renderReferenceAdded, renderTurnStart, type StreamView } from './render-event.ts';
import { renderComposerStatus, renderTurnBubble } from './views.ts';

/** What one page asked for itself: claimed from the feed as its events arrive (see claim*), so it is not drawn twice. */
export interface OwnWork {
  /** Messages (and Regenerates) sent from this page whose `started` has not come yet, per conversation. */
  pendingTurns: Map<string, number>;
  /** Generates asked from this page whose `generation` has not come yet, per conversation. */
  pendingImages: Map<string, number>;
  turns: Set<number>;
  images: Set<string>;
  /** The pane revisions this page's own changes made, as `<conversation>:<revision>`: not stale for it. */
  revisions: Set<string>;
}

export function createOwnWork(): OwnWork {
  return { pendingTurns: new Map(), pendingImages: new Map(), turns: new Set(), images: new Set(), revisions: new Set() };
}

/** How many of its own revisions a page remembers: its changes of the last minutes. */
const MAX_OWN_REVISIONS = 200;

/**
 * The revision a page's change is checked against: its base, moved past every revision its own earlier
 * changes made since (two saves sent at once, the second from the revision before the first's answer). Any
 * change from elsewhere stops it there, so that one is still refused as stale.
 */
export function skipOwnRevisions(own: OwnWork, conversationId: string, base: number, current: number): number {
  let effective = base;
  while (effective < current && own.revisions.has(`${conversationId}:${effective + 1}`)) effective++;
  return effective;
}

/** Revisions after `before` up to `after` were made by this page. */
export function noteOwnRevisions(own: OwnWork, conversationId: string, before: number, after: number): void {
  for (let revision = before + 1; revision <= after; revision++) own.revisions.add(`${conversationId}:${revision}`);
  for (const oldest of own.revisions) {
    if (own.revisions.size <= MAX_OWN_REVISIONS) break;
    own.revisions.delete(oldest);
  }
}

/** One more request of this page whose events it draws itself (`undo` when the request was refused). */
export function expectOwn(counts: Map<string, number>, conversationId: string, change: 1 | -1): void {
  const next = (counts.get(conversationId) ?? 0) + change;
  if (next <= 0) counts.delete(conversationId);
  else counts.set(conversationId, next);
}

/** Takes one pending request of the conversation, if any: the event that just came is its. */
function claim(counts: Map<string, number>, conversationId: string): boolean {
  if ((counts.get(conversationId) ?? 0) === 0) return false;
  expectOwn(counts, conversationId, -1);
  return true;
}

export interface LiveViewDeps {
  service: EaselService;
  conversationId: string;
  own: OwnWork;
  /** The reply being written, with the text this page shows of it (the page was drawn from it). */
  running?: { turnId: number; text: string } | undefined;
}

export interface LiveView {
  render(event: LiveEvent): Html;
}

export function createLiveView(deps: LiveViewDeps): LiveView {
  const { service, conversationId, own } = deps;
  const turns = new Map<number, StreamView>();
  const images = new Map<string, StreamView | 'followed'>();
  if (deps.running) {
    // The page drew the running reply's text so far; its stream goes on from exactly there.
    const bubbleId = `turn-${deps.running.turnId}`;
    turns.set(deps.running.turnId, { conversationId, live: true, bubbleId, started: true, markdown: renderStreamingText(describeBubble(bubbleId), deps.running.text).stream });
  }

  function startTurn(event: Extract<TurnEvent, { type: 'started' }>): Html {
    const conversation = service.getConversation(conversationId);
    const userText = conversation?.turns.find((turn) => turn.id === event.userTurnId)?.text;
    const view: StreamView & { bubbleId: string; at: string } = {
      conversationId,
      live: true,
      bubbleId: `turn-${event.turnId}`,
      started: true,
      at: new Date().toISOString(),
      ...(userText === undefined ? {} : { userText }),
    };
    turns.set(event.turnId, view);
    // An Edit or Regenerate from another tab: the exchange it replaces is shown dimmed, as in that tab.
    const replaced = (conversation?.turns ?? []).filter((turn) => event.replaces.includes(turn.id));
    return joinHtml([
      ...replaced.map((turn) => renderPartial(`#turn-${turn.id}`, 'outerHTML', renderTurnBubble(conversationId, conversation?.turns ?? [], turn, conversation?.checks))),
      renderTurnStart(view),
    ]);
  }

  function renderImage(event: LiveEvent & { imageId?: string }, imageId: string): Html {
    if (own.images.has(imageId)) return EMPTY;
    const turnId = 'turnId' in event && typeof event.turnId === 'number' ? event.turnId : null;
    if (turnId !== null && own.turns.has(turnId)) return EMPTY;
    let view = images.get(imageId);
    if (view === undefined) {
      if (event.type !== 'generation') return EMPTY;
      if (turnId === null && claim(own.pendingImages, conversationId)) {
        own.images.add(imageId);
        return EMPTY;
      }
      // A reply's image: its block follows the image by itself into the reply's bubble. Generate's: drawn here.
      view = turnId === null ? { conversationId, imageStarted: true, generationId: imageId } : 'followed';
      images.set(imageId, view);
      return renderEventHtml(event as TurnEvent, turnId === null ? view as StreamView : { conversationId, imageStarted: true, generationId: imageId, replied: true, bubbleId: `turn-${turnId}` });
    }
    if (view === 'followed') return EMPTY;
    // A batch or a comparison goes on after its first image: its view ends where the sender's does, or at an error.
    const ended = event.type === 'error' || (event.type === 'image' && isLastImage(event));
    if (ended) images.delete(imageId);
    return renderEventHtml(event as TurnEvent, view);
  }

  function renderReply(event: LiveEvent & { turnId: number }): Html {
    if (event.type === 'started') {
      if (claim(own.pendingTurns, conversationId)) {
        own.turns.add(event.turnId);
        return EMPTY;
      }
      return startTurn(event);
    }
    if (own.turns.has(event.turnId)) return EMPTY;
    const view = turns.get(event.turnId) ?? { conversationId, live: true, bubbleId: `turn-${event.turnId}`, started: true };
    turns.set(event.turnId, view);
    const fragment = renderEventHtml(event as TurnEvent, view);
    // The same bookkeeping the sender's stream does (routes.ts streamHtml).
    view.statusShown = event.type === 'status';
    if (event.type === 'done') turns.delete(event.turnId);
    return fragment;
  }

  /**
   * An image deleted elsewhere (the gallery, the API): its thumbnail and its Generate entry go, and the image area,
   * when it showed it, shows the newest one left. Every picture on the page carries its URL, and an image's file is
   * named after its id (generation.ts and archive.ts both store `<id>.png`).
   */
  function renderImageDeleted(imageId: string): Html {
    if (!isImageId(imageId)) return EMPTY;
    const shows = `[data-url="/images/${imageId}.png"]`;
    const latest = service.getConversation(conversationId)?.images.at(-1);
    return joinHtml([
      // The entry goes only when the picture is all it holds: a batch or a comparison keeps its other pictures.
      renderPartial(`.msg.generated:has(${shows}):not(:has(.thumb-item + .thumb-item, .compare-side))`, 'delete'),
      renderPartial(`.thumb-item:has(${shows})`, 'delete'),
      // What its check found goes with it.
      renderPartial(`#${describeCritique(imageId).status}`, 'delete'),
      renderPartial(`#${describeCritique(imageId).block}`, 'delete'),
      renderPartial(`#image-frame:has(${shows})`, 'innerHTML', latest ? renderFramedImage(latest) : renderNoImage()),
    ]);
  }

  return {
    render(event) {
      if (event.type === 'title') {
        return joinHtml([renderPartial('#conversation-title', 'textContent', html`${event.title}`), renderPartial('#rename-title', 'outerHTML', renderRenameInput(event.title))]);
      }
      if (event.type === 'deleted') {
        return renderComposerStatus('This conversation was deleted in another tab or window. Your text is kept: copy it, or start a new conversation.');
      }
      if (event.type === 'image_deleted') return renderImageDeleted(event.imageId);
      if (event.type === 'reference_added') {
        const image = service.getConversation(conversationId)?.images.find((stored) => stored.id === event.imageId);
        return image ? renderReferenceAdded(image) : EMPTY;
      }
      // A picture being checked, and what was found (or why not), under the picture in every page: this page's own
      // Check draws the same on its stream, and each replaces itself, so either order shows it once.
      if (event.type === 'check_started') return renderCheckStarted(conversationId, event.imageId, event.model);
      if (event.type === 'check_failed') return renderCheckFailedShown(event.imageId, event.code, event.message);
      if (event.type === 'critique') return renderCritiqueShown(event);
      if ('imageId' in event && typeof event.imageId === 'string') return renderImage(event, event.imageId);
      if (event.type === 'pane') {
        // Another tab's change, or a reply's: shown unless this page is typing in that field (web/js/pane.js).
        if (typeof event.turnId === 'number' && own.turns.has(event.turnId)) return EMPTY;
        return renderPaneUpdate(conversationId, event, { live: true });
      }
      if ('turnId' in event && typeof event.turnId === 'number') return renderReply(event as LiveEvent & { turnId: number });
      // A message that could not be stored: its sender's own answer says so.
      return EMPTY;
    },
  };
}
