// The library beside the chat: New conversation, search, the list (newest activity first), Import; and
// the chat's head (title, Rename, Export, Delete). Switching is an htmx GET of the conversation's part of
// the page, so the sidebar, the status line and the open dialog stay.
import type { ConversationSummary } from '../../core/index.ts';
import { conversationPath, renderTime } from './bubbles.ts';
import { EMPTY, html, joinHtml, renderPartial, type Html } from './markup.ts';

/** What a page's sidebar shows: the conversations (filtered by `query`), the open one marked. */
export interface LibraryState {
  conversations: readonly ConversationSummary[];
  /** The id of the open conversation; '' on the empty new-conversation page. */
  currentId: string;
  query: string;
}

/** Attributes of a link that switches the conversation in place, keeping its address bookmarkable. */
function switchTo(path: string): Html {
  return html`hx-get="${path}" hx-target="#conversation" hx-swap="outerHTML settle:0" hx-push-url="${path}" hx-include="#conversation-search"`;
}

/**
 * The sidebar. Its refreshes (a live event, a search) share one queue where the newest replaces any in flight: a
 * refresh asked before the marker of the current conversation changed must never land after one asked after it.
 */
export function renderLibrary(state: LibraryState): Html {
  return html`<nav id="library" class="library" aria-label="Conversations">
<a href="/" class="button new-conversation" ${switchTo('/')}>New conversation</a>
<a href="/gallery" class="button quiet gallery-link">Gallery</a>
<div class="library-search" role="search">
<label for="conversation-search" class="visually-hidden">Search conversations</label>
<input type="search" id="conversation-search" name="q" value="${state.query}" placeholder="Search conversations" autocomplete="off" hx-get="/conversations" hx-trigger="input changed delay:250ms, search" hx-target="#conversation-list" hx-swap="innerMorph" hx-include="#conversation-search, #current-conversation" hx-sync="#conversation-list:replace">
${renderCurrentMarker(state.currentId)}
</div>
<ul id="conversation-list" class="conversation-list" hx-get="/conversations" hx-trigger="easel:list from:body" hx-include="#conversation-search, #current-conversation" hx-swap="innerMorph" hx-sync="replace">
${renderConversationItems(state)}
</ul>
<form id="import-form" class="import-form" hx-post="/c/import" hx-encoding="multipart/form-data" hx-swap="none" hx-disable="#import-button">
<label id="import-button" class="button import-button">Import…<input type="file" id="import-file" name="file" accept=".zip,application/zip" class="visually-hidden"></label>
<p id="import-status" class="hint" aria-live="polite"></p>
</form>
</nav>`;
}

/** The open conversation's id, sent with a search or a refresh of the list so it stays marked. */
export function renderCurrentMarker(currentId: string): Html {
  return html`<input type="hidden" id="current-conversation" name="current" value="${currentId}">`;
}

export function renderConversationItems(state: LibraryState): Html {
  if (state.conversations.length === 0) {
    return html`<li class="conversation-none">${state.query.trim() === '' ? 'Your conversations appear here.' : 'No conversation holds these words.'}</li>`;
  }
  return joinHtml(
    state.conversations.map((conversation) => {
      const path = conversationPath(conversation.id);
      const current = conversation.id === state.currentId ? html` aria-current="page"` : EMPTY;
      // A long title is cut with an ellipsis at the list's width (web/easel.css): the whole of it shows on hover. On
      // the title, not the link, so a screen reader does not hear it twice (as the link's name and description).
      return html`<li id="item-${conversation.id}"><a href="${path}" class="conversation-link"${current} ${switchTo(path)}><span class="conversation-title" title="${conversation.title}">${conversation.title}</span>${renderTime(conversation.updatedAt, 'conversation-time')}</a></li>`;
    }),
  );
}

export interface ChatHead {
  id: string;
  title: string;
  /** The empty new-conversation page: nothing to rename, export or delete yet. */
  isNew: boolean;
  imageCount: number;
}

/** The conversation's title and what can be done with it. */
export function renderChatHead(head: ChatHead): Html {
  if (head.isNew) {
    return html`<div id="chat-head" class="chat-head"><h2 id="conversation-title" class="conversation-heading">${head.title}</h2></div>`;
  }
  const images = head.imageCount === 0 ? '' : ` and its ${head.imageCount === 1 ? 'image' : `${head.imageCount} images`}`;
  const confirm = `Delete “${head.title}”${images}? This cannot be undone; Export keeps a copy.`;
  return html`<div id="chat-head" class="chat-head">
<h2 id="conversation-title" class="conversation-heading">${head.title}</h2>
<div class="chat-actions">
<button type="button" id="rename-button" class="quiet" aria-controls="rename-form" aria-expanded="false">Rename</button>
<a class="button quiet" id="export-link" href="/api/conversations/${encodeURIComponent(head.id)}/export" download>Export</a>
<button type="button" id="delete-button" class="quiet danger" hx-delete="${conversationPath(head.id)}" hx-confirm="${confirm}" hx-swap="none">Delete</button>
</div>
<form id="rename-form" class="rename-form" hx-patch="${conversationPath(head.id)}" hx-swap="none" hidden novalidate>
<label for="rename-title" class="visually-hidden">New title</label>
${renderRenameInput(head.title)}
<button type="submit" class="primary">Save</button><button type="button" id="rename-cancel" class="quiet">Cancel</button>
<p id="rename-error" class="field-error" aria-live="polite"></p>
</form>
</div>`;
}

/** After a conversation came into being (its first message or Generate): its head, its id marked in the list. */
export function renderCreated(head: ChatHead): Html {
  return joinHtml([
    renderPartial('#start-new', 'delete'),
    renderPartial('#chat-head', 'outerHTML', renderChatHead(head)),
    renderPartial('#current-conversation', 'outerHTML', renderCurrentMarker(head.id)),
  ]);
}

/** The rename form's field, holding the title: drawn with the head, and again when another tab renames. */
export function renderRenameInput(title: string): Html {
  return html`<input id="rename-title" name="title" value="${title}" maxlength="120" autocomplete="off" aria-describedby="rename-error">`;
}
