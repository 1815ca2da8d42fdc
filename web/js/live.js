// The page as a live view (server/http/page/live-view.ts): #live follows the conversation, and every request the
// page makes says which page it is (its own turns and images are not drawn twice) and which pane revision it
// shows (a change made from an older one is refused as stale, and the newer pane is shown).
import { byId } from './dom.js';

/**
 * @param {CustomEvent<{ ctx: import('htmx.org').HtmxRequestCtx }>} event
 */
export function onLiveConfigRequest(event) {
  const live = byId('live');
  const body = event.detail.ctx.request.body;
  if (!live || !(body instanceof FormData) || event.detail.ctx.request.method === 'GET') return;
  if (live.dataset.view) body.set('viewId', live.dataset.view);
  if (live.dataset.revision) body.set('baseRevision', live.dataset.revision);
}

/**
 * Takes the pane revision of a pane update (from this page's own answer or the live stream, which can arrive in
 * either order): false when the page already shows a newer pane, whose values the older update must not replace.
 * @param {string | undefined} revision
 * @returns {boolean}
 */
export function takeRevision(revision) {
  const live = byId('live');
  if (!live || revision === undefined || !/^\d+$/.test(revision)) return true;
  if (live.dataset.revision !== undefined && Number(revision) < Number(live.dataset.revision)) return false;
  live.dataset.revision = revision;
  return true;
}
