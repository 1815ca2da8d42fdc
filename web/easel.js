// Easel's page behaviour that htmx does not cover. The page runs under a strict CSP, so there are no
// inline handlers and no eval: everything is wired here with addEventListener. Switching conversations
// swaps #conversation in place, so handlers are delegated from the document and look elements up when
// they run; mount() re-attaches the observers of the conversation shown.
(() => {
  'use strict';

  const byId = (id) => document.getElementById(id);
  if (!byId('composer')) return; // not a conversation page

  /** Each send carries a fresh key; the server refuses a key it has seen, so no reply runs twice. */
  function newSendKey() {
    const bytes = new Uint8Array(18);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  }

  const isStreamSource = (elt) => elt instanceof Element && elt.matches('[data-stream]');
  /** A phone or tablet: Enter makes a new line there (the Send button sends). */
  const isTouch = () => matchMedia('(pointer: coarse)').matches;
  /** The narrow layout: the page itself is the one scrolling region, the chat log has no scrollbar of its own. */
  const isNarrow = () => matchMedia('(max-width: 880px)').matches;
  const isNewConversation = () => byId('start-new') !== null;
  const conversationId = () => byId('conversation')?.dataset.conversationId ?? '';

  // ---- What belongs to the conversation shown (reset by mount) ----

  let promptState;
  let settingsUnsaved;
  /** Settings the user changed that the server has not stored yet: only these are sent, and pinned. */
  let dirtySettings;
  let pendingText;
  /** While the last message is being edited: the draft that was in the composer before. */
  let editing;
  /** Bubbles marked replaced as a Regenerate or an Edit was sent; put back if it did not start. */
  let markedReplaced;
  let observers = [];
  let knownHeight = 0;

  function mount() {
    for (const observer of observers) observer.disconnect();
    observers = [];
    promptState = { unsaved: false, sending: null };
    settingsUnsaved = false;
    dirtySettings = new Set();
    pendingText = '';
    editing = null;
    markedReplaced = [];
    const log = byId('log');

    // Follow new text only while the reader is at the bottom. Measured against the height before the
    // change, and read now rather than from a scroll event (those arrive a frame late): a reader who just
    // scrolled up is never pulled back down.
    knownHeight = 0;
    const follow = new MutationObserver((mutations) => {
      const wasAtBottom = knownHeight - log.scrollTop - log.clientHeight < 40;
      if (wasAtBottom) log.scrollTop = log.scrollHeight;
      knownHeight = log.scrollHeight;
      for (const mutation of mutations) for (const node of mutation.addedNodes) if (node.nodeType === 1) formatTimes(node);
    });
    follow.observe(log, { childList: true, subtree: true, characterData: true });
    observers.push(follow);

    // A message was stored, the conversation exists: its address, its title, its unsaved changes saved.
    const chat = document.querySelector('#conversation .chat');
    const created = new MutationObserver(() => {
      document.title = `${byId('conversation-title')?.textContent ?? 'Easel'} · Easel`;
      if (isNewConversation() || location.pathname !== '/') return;
      history.replaceState({ htmx: true }, '', `/c/${encodeURIComponent(conversationId())}`);
      if (promptState.unsaved) htmx.trigger(byId('prompt'), 'easel:save');
      if (settingsUnsaved) {
        settingsUnsaved = false;
        byId('settings-form').dispatchEvent(new Event('change', { bubbles: true }));
      }
    });
    // The head is a child of the chat (replaced whole); #start-new a child of the composer.
    created.observe(chat, { childList: true });
    created.observe(byId('composer'), { childList: true });
    observers.push(created);

    // A message next to a field also marks the field invalid for assistive technology.
    const markInvalid = () => {
      for (const slot of document.querySelectorAll('.field-error[id^="error-"]')) {
        const field = byId(`setting-${slot.id.slice('error-'.length)}`);
        if (field) field.setAttribute('aria-invalid', slot.textContent.trim() ? 'true' : 'false');
      }
      byId('prompt').setAttribute('aria-invalid', byId('prompt-error').textContent.trim() ? 'true' : 'false');
    };
    const invalid = new MutationObserver(markInvalid);
    for (const region of [byId('settings-form'), byId('prompt-error')]) invalid.observe(region, { childList: true, subtree: true, characterData: true });
    observers.push(invalid);

    observers.push(watchReplies(log));
    observers.push(watchImageFrame());
    watchPrompt();
    updateGenerateState();
    if (isTouch()) byId('message').placeholder = 'Describe the picture you want…';
    // The pane as the server decided it: copied into the fields that hold no unsaved typing.
    const paneInbox = byId('pane-inbox');
    const panes = new MutationObserver(() => {
      const carrier = paneInbox.querySelector('.pane-values');
      if (!carrier) return;
      paneInbox.replaceChildren();
      applyPane(carrier.dataset);
      announceSuggestion();
    });
    panes.observe(paneInbox, { childList: true });
    observers.push(panes);

    formatTimes(byId('conversation'));
    scrollToEnd();
    // A phone opens the page at its top; a desktop at the composer, ready to type.
    if (!isNarrow() && !isTouch()) byId('message').focus({ preventScroll: true });
  }

  /**
   * A streamed token is a text node added to the Markdown block in progress: merged into the one before,
   * so a block is one node, not one per token (up to 4 kB each, so a merge copies little). A reply's
   * aria-busy ends with its typing dots: screen readers then read the finished reply once.
   */
  function watchReplies(log) {
    let knownLogHeight = log.scrollHeight;
    const observer = new MutationObserver((mutations) => {
      for (const mutation of mutations) {
        const parent = mutation.target;
        if (!(parent instanceof Element)) continue;
        if (parent.classList.contains('md-live')) {
          for (const node of mutation.addedNodes) {
            const previous = node.previousSibling;
            if (node.nodeType !== Node.TEXT_NODE || previous?.nodeType !== Node.TEXT_NODE || previous.length >= 4096 || !node.isConnected) continue;
            previous.appendData(node.data);
            node.remove();
          }
        }
        for (const node of mutation.removedNodes) {
          if (node instanceof Element && node.classList.contains('typing')) parent.closest('.msg')?.removeAttribute('aria-busy');
        }
      }
      // The narrow layout scrolls the page: a reader who sees the composer keeps seeing it as the reply grows.
      const grown = log.scrollHeight - knownLogHeight;
      knownLogHeight = log.scrollHeight;
      if (isNarrow() && grown > 0 && byId('composer').getBoundingClientRect().top - grown < innerHeight) scrollBy(0, grown);
    });
    observer.observe(log, { childList: true, subtree: true });
    return observer;
  }

  function scrollToEnd() {
    const log = byId('log');
    log.scrollTop = log.scrollHeight;
    knownHeight = log.scrollHeight;
  }

  // A switch from the sidebar replaced the conversation: mount what is shown now.
  document.addEventListener('htmx:after:swap', () => {
    if (byId('log') && byId('log').dataset.mounted !== 'yes') {
      byId('log').dataset.mounted = 'yes';
      mount();
      closeLibrary();
    }
  });

  // ---- Times: written by the server in UTC, shown in the reader's own time zone ----

  function formatTimes(root) {
    const times = root.matches?.('time[datetime]') ? [root] : root.querySelectorAll?.('time[datetime]:not([data-local])') ?? [];
    const today = new Date().toDateString();
    for (const time of times) {
      const date = new Date(time.getAttribute('datetime'));
      if (Number.isNaN(date.getTime()) || time.dataset.local) continue;
      time.dataset.local = 'yes';
      time.title = date.toLocaleString();
      const sameDay = date.toDateString() === today;
      time.textContent = sameDay
        ? date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
        : date.toLocaleDateString([], { month: 'short', day: 'numeric' });
    }
  }
  // A refresh of the list morphs its items in place (new text, the marker attribute gone): format again.
  new MutationObserver(() => formatTimes(byId('conversation-list'))).observe(byId('conversation-list'), {
    childList: true,
    subtree: true,
    characterData: true,
    attributes: true,
    attributeFilter: ['datetime', 'data-local'],
  });
  formatTimes(byId('library'));

  // ---- Composer: Enter sends, Shift+Enter is a new line, empty messages are not sent ----

  document.addEventListener('keydown', (event) => {
    const target = event.target instanceof Element ? event.target : null;
    if (event.key === 'Escape') {
      if (target?.id === 'rename-title') closeRename();
      else if (editing && target?.id === 'message') cancelEdit();
      else closeLibrary();
      return;
    }
    if (isUndoKey(event) && !isTextField(target)) {
      const button = byId(event.shiftKey || event.key.toLowerCase() === 'y' ? 'prompt-redo' : 'prompt-undo');
      if (button) {
        event.preventDefault();
        if (!button.disabled) button.click();
      }
      return;
    }
    if (target?.id !== 'message') return;
    if (event.key !== 'Enter' || event.shiftKey || event.isComposing || event.altKey || event.ctrlKey || event.metaKey) return;
    if (isTouch()) return;
    event.preventDefault();
    if (byId('send').disabled) return;
    byId('composer').requestSubmit();
  });

  // Chromium keeps one undo history for the whole page: Ctrl+Z in a field with nothing left to undo reaches back
  // into another field's typing (the prompt's, say). The browser's undo may change only the field being typed in.
  document.addEventListener(
    'beforeinput',
    (event) => {
      if ((event.inputType === 'historyUndo' || event.inputType === 'historyRedo') && event.target !== document.activeElement) event.preventDefault();
    },
    true,
  );

  /** Ctrl+Z, Ctrl+Shift+Z, Ctrl+Y (⌘ on a Mac). */
  function isUndoKey(event) {
    const key = event.key.toLowerCase();
    return (event.ctrlKey || event.metaKey) && !event.altKey && (key === 'z' || (key === 'y' && !event.shiftKey));
  }

  /** Where Ctrl+Z belongs to the field's own undo. */
  function isTextField(target) {
    if (!target) return false;
    if (target.isContentEditable) return true;
    if (target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement) return true;
    return target instanceof HTMLInputElement && !['checkbox', 'radio', 'button', 'submit', 'range', 'color', 'file'].includes(target.type);
  }

  document.addEventListener('htmx:config:request', (event) => {
    const ctx = event.detail.ctx;
    const elt = ctx.sourceElement;
    const body = ctx.request.body;
    const prompt = byId('prompt');
    // Before its first message the conversation does not exist: prompt and settings wait, and go with it.
    if (isNewConversation() && (elt === prompt || elt === byId('settings-form'))) {
      event.preventDefault();
      if (elt === prompt) promptState.unsaved = true;
      else settingsUnsaved = true;
      return;
    }
    if (elt === prompt) promptState.sending = String(body.get('prompt') ?? '');
    // Only the fields the user changed are set by hand (and pinned): a stale value never overwrites the model's.
    if (elt === byId('settings-form')) {
      body.set('changed', [...dirtySettings].join(','));
      ctx.sentSettings = [...dirtySettings];
      dirtySettings.clear();
    }
    if (elt instanceof Element && elt.matches('[data-one-shot]')) {
      body.set('sendKey', newSendKey());
      if (isNewConversation()) body.set('startNew', '1');
    }
    if (!isStreamSource(elt)) return;
    if (elt.id !== 'regenerate-form' && String(body.get('text') ?? '').trim() === '') {
      event.preventDefault();
      byId('composer-status').textContent = 'Type a message first.';
      byId('message').focus();
      return;
    }
    // Refused whole rather than cut: the server would refuse it too, and nothing the user typed is lost.
    const length = String(body.get('text') ?? '').trim().length;
    const maxChars = Number(byId('message').dataset.maxChars);
    if (elt.id === 'composer' && length > maxChars) {
      event.preventDefault();
      const over = (length - maxChars).toLocaleString();
      byId('composer-status').innerHTML = '';
      const notice = document.createElement('span');
      notice.className = 'composer-error';
      notice.textContent = `Not sent: your message has ${length.toLocaleString()} characters, ${over} more than the ${maxChars.toLocaleString()} a message can hold. Shorten it or split it in two; your text is kept.`;
      byId('composer-status').append(notice);
      byId('message').focus();
      return;
    }
    body.set('sendKey', newSendKey());
    if (elt.id === 'composer' && isNewConversation()) {
      for (const [name, value] of new FormData(byId('settings-form'))) body.set(name, value);
      settingsUnsaved = false;
      dirtySettings.clear();
    }
    // An edit not saved yet travels with the message, so the model hears of it in this turn.
    if (promptState.unsaved || (elt.id === 'composer' && isNewConversation())) {
      body.set('prompt', prompt.value);
      promptState.unsaved = false;
    }
  });

  document.addEventListener('htmx:before:request', (event) => {
    const elt = event.detail.ctx.sourceElement;
    if (!isStreamSource(elt)) return;
    byId('composer-status').textContent = '';
    scrollToEnd();
    if (elt.id === 'composer') {
      const message = byId('message');
      pendingText = message.value;
      message.value = '';
      if (editing) markReplaced(lastExchange(true));
    }
    if (elt.id === 'regenerate-form') markReplaced(lastExchange(false));
  });

  document.addEventListener('htmx:finally:request', (event) => {
    const ctx = event.detail.ctx;
    const elt = ctx.sourceElement;
    // A failed image may mean the backend went away: the status line says so at once.
    if (elt instanceof Element && elt.id === 'generate-form') {
      htmx.trigger(document.body, 'easel:status');
      // htmx enables the button again right after this event: the empty-prompt rule is applied after it.
      queueMicrotask(updateGenerateState);
    }
    if (!isStreamSource(elt)) return;
    const status = ctx.response?.status;
    const message = byId('message');
    // The user's text is never lost: a send that did not start puts it back.
    if (elt.id === 'composer' && status !== 200 && message && message.value === '') message.value = pendingText;
    if (status === 200) {
      markedReplaced = [];
      if (elt.id === 'composer' && editing) endEdit();
    } else {
      unmarkReplaced();
    }
    const composerStatus = byId('composer-status');
    if (status === undefined && composerStatus && composerStatus.textContent === '') {
      composerStatus.textContent = 'Could not reach Easel. Is it still running? Your text is kept.';
    }
    for (const dots of document.querySelectorAll('#log .typing')) dots.remove();
    htmx.trigger(document.body, 'easel:status');
  });

  // A message that could not be stored comes back into the composer (the server says which).
  new MutationObserver(() => {
    const inbox = byId('composer-inbox');
    const carrier = inbox.querySelector('.restore-text');
    if (!carrier) return;
    const text = carrier.dataset.text ?? '';
    inbox.replaceChildren();
    const message = byId('message');
    if (!message || message.value === text) return;
    message.value = message.value === '' ? text : `${text}\n\n${message.value}`;
    message.focus();
  }).observe(byId('composer-inbox'), { childList: true });

  // ---- Copy, Edit and Regenerate on the messages ----

  /** The last message (with the replies after it), or only the replies after it. */
  function lastExchange(withMessage) {
    const shown = [...document.querySelectorAll('#log .msg.user:not(.replaced), #log .msg.assistant:not(.replaced)')];
    const replies = [];
    for (let index = shown.length - 1; index >= 0; index--) {
      const bubble = shown[index];
      if (bubble.classList.contains('user')) {
        if (withMessage) replies.unshift(bubble);
        break;
      }
      replies.unshift(bubble);
    }
    return replies;
  }

  function markReplaced(bubbles) {
    for (const bubble of bubbles) {
      bubble.classList.add('replaced');
      const label = document.createElement('p');
      label.className = 'replaced-label';
      label.textContent = 'Replaced';
      bubble.querySelector('.text')?.before(label);
      markedReplaced.push({ bubble, label });
    }
  }

  function unmarkReplaced() {
    for (const { bubble, label } of markedReplaced) {
      bubble.classList.remove('replaced');
      label.remove();
    }
    markedReplaced = [];
  }

  async function copyText(text, button) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      const area = document.createElement('textarea');
      area.value = text;
      area.setAttribute('readonly', '');
      area.className = 'visually-hidden';
      button.after(area);
      area.select();
      const copied = document.execCommand('copy');
      area.remove();
      return copied;
    }
  }

  function startEdit(bubble) {
    const message = byId('message');
    editing = { draft: message.value };
    message.value = bubble.querySelector('.text')?.textContent ?? '';
    byId('replace-last').disabled = false;
    const status = byId('composer-status');
    status.textContent = 'Editing your last message: sending replaces it and the reply after it. ';
    const cancel = document.createElement('button');
    cancel.type = 'button';
    cancel.id = 'edit-cancel';
    cancel.className = 'quiet';
    cancel.textContent = 'Cancel';
    status.append(cancel);
    message.focus();
    message.setSelectionRange(message.value.length, message.value.length);
  }

  function endEdit() {
    editing = null;
    const replaceLast = byId('replace-last');
    if (replaceLast) replaceLast.disabled = true;
    byId('edit-cancel')?.remove();
  }

  function cancelEdit() {
    const draft = editing?.draft ?? '';
    endEdit();
    byId('message').value = draft;
    byId('composer-status').textContent = '';
  }

  // ---- Rename ----

  function openRename() {
    const form = byId('rename-form');
    const input = byId('rename-title');
    input.value = byId('conversation-title').textContent;
    form.hidden = false;
    byId('conversation-title').hidden = true;
    byId('rename-button').setAttribute('aria-expanded', 'true');
    input.focus();
    input.select();
  }

  function closeRename() {
    const form = byId('rename-form');
    if (!form || form.hidden) return;
    form.hidden = true;
    byId('conversation-title').hidden = false;
    byId('rename-button').setAttribute('aria-expanded', 'false');
    byId('rename-error').textContent = '';
    byId('rename-button').focus();
  }

  // ---- The library on a narrow window: behind a button ----

  function closeLibrary() {
    if (!document.body.classList.contains('library-open')) return;
    document.body.classList.remove('library-open');
    byId('library-toggle').setAttribute('aria-expanded', 'false');
  }

  // ---- Clicks ----

  document.addEventListener('click', (event) => {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    // Open over the page (a narrow window): a click beside it, or on a conversation, closes it.
    if (document.body.classList.contains('library-open') && !target.closest('#library-toggle')) {
      if (!target.closest('#library') || target.closest('a')) closeLibrary();
    }
    const copy = target.closest('.copy-message');
    if (copy) {
      const shown = copy.closest('.msg')?.querySelector('.text');
      // A reply is rendered Markdown: copy what it reads as (paragraphs and list items on their own lines).
      const text = (shown?.classList.contains('md') ? shown.innerText : shown?.textContent) ?? '';
      void copyText(text, copy).then((copied) => {
        copy.textContent = copied ? 'Copied' : 'Select the text and press Ctrl+C';
        setTimeout(() => (copy.textContent = 'Copy'), 1500);
      });
      return;
    }
    const edit = target.closest('.edit-message');
    if (edit) return startEdit(edit.closest('.msg'));
    if (target.closest('#edit-cancel')) return cancelEdit();
    if (target.closest('.regenerate-button, .retry-button')) {
      if (!byId('send').disabled) byId('regenerate-form').requestSubmit();
      return;
    }
    const sendAgain = target.closest('.send-again-button');
    if (sendAgain) {
      if (byId('send').disabled) return;
      byId('resend-text').value = sendAgain.dataset.text ?? '';
      byId('resend-form').requestSubmit();
      return;
    }
    // Stop hides itself as the reply ends: the keyboard goes back to the composer, not to the page's top.
    if (target.closest('#stop')) byId('message').focus();
    if (target.closest('#rename-button')) return openRename();
    if (target.closest('#rename-cancel')) return closeRename();
    if (target.closest('#library-toggle')) {
      const open = document.body.classList.toggle('library-open');
      byId('library-toggle').setAttribute('aria-expanded', String(open));
      if (open) byId('conversation-search').focus();
      return;
    }
    if (target.closest('#copy-prompt')) return copyPrompt();
    if (target.closest('#random-seed')) {
      const seed = byId('setting-seed');
      seed.value = '-1';
      dirtySettings.add('seed');
      seed.dispatchEvent(new Event('change', { bubbles: true }));
      return;
    }
    const view = target.closest('[data-image-view]');
    if (view) {
      event.preventDefault();
      showImage(view);
    }
  });

  // Import: choosing the file sends it.
  document.addEventListener('change', (event) => {
    if (event.target instanceof Element && event.target.id === 'import-file' && event.target.files?.length) {
      byId('import-status').textContent = 'Importing…';
      byId('import-form').requestSubmit();
    }
  });
  document.addEventListener('htmx:finally:request', (event) => {
    const elt = event.detail.ctx.sourceElement;
    if (!(elt instanceof Element) || elt.id !== 'import-form') return;
    const status = byId('import-status');
    if (status.textContent === 'Importing…') status.textContent = '';
    byId('import-file').value = '';
  });

  // ---- Prompt pane and settings: the server decides what they hold; typing not saved yet stays ----

  document.addEventListener('input', (event) => {
    const target = event.target;
    if (!(target instanceof Element)) return;
    if (target.id === 'prompt') {
      promptState.unsaved = true;
      byId('prompt-saved').textContent = '';
    }
    if (target.closest('#settings-form') && target.name && target.name !== 'sizePreset') dirtySettings.add(target.name);
    if (target.id === 'setting-width' || target.id === 'setting-height') matchPreset();
  });
  // A checkbox or a select changes without an input event in some browsers.
  document.addEventListener(
    'change',
    (event) => {
      const target = event.target;
      if (!(target instanceof Element) || !target.closest('#settings-form') || !target.name) return;
      if (target.name === 'sizePreset') {
        dirtySettings.add('width');
        dirtySettings.add('height');
      } else {
        dirtySettings.add(target.name);
      }
    },
    true,
  );

  document.addEventListener('htmx:after:request', (event) => {
    const ctx = event.detail.ctx;
    const prompt = byId('prompt');
    if (ctx.sourceElement === byId('settings-form') && ctx.response?.status !== 200) {
      // Not stored: those fields still hold the user's change, sent again with the next one.
      for (const name of ctx.sentSettings ?? []) dirtySettings.add(name);
    }
    if (ctx.sourceElement !== prompt || ctx.response?.status !== 200) return;
    if (prompt.value === promptState.sending) promptState.unsaved = false;
  });

  // ---- Prompt pane: its length, its CLIP tokens, Generate's state, and changes made for the user ----

  /**
   * About how many CLIP tokens a prompt takes. CLIP's tokenizer splits text into runs of letters, single
   * digits and runs of punctuation, then gives a common word one token and a long or rare word more. So:
   * one token per word of up to 10 letters (one more per 10 further letters), one per digit, one per
   * punctuation mark. Within a few tokens of CLIP on typical prompts; it errs high on long common words.
   */
  function estimateClipTokens(text) {
    let tokens = 0;
    for (const [part] of text.matchAll(/\p{L}+|\p{N}|[^\s\p{L}\p{N}]/gu)) tokens += /^\p{L}/u.test(part) ? Math.ceil(part.length / 10) : 1;
    return tokens;
  }

  function updatePromptCount() {
    const prompt = byId('prompt');
    const count = byId('prompt-count');
    if (!prompt || !count) return;
    const chars = prompt.value.length;
    const maxChars = Number(prompt.dataset.maxChars);
    const limit = Number(count.dataset.tokenLimit);
    const tokens = estimateClipTokens(prompt.value);
    const characters = `${chars.toLocaleString()} ${chars === 1 ? 'character' : 'characters'}`;
    count.classList.toggle('over', tokens > limit);
    count.classList.toggle('too-long', chars > maxChars);
    if (chars > maxChars) {
      count.textContent = `${characters}: a prompt can hold at most ${maxChars.toLocaleString()}; it is not saved until it is shorter.`;
    } else if (tokens > limit) {
      count.textContent = `${characters} · about ${tokens} tokens: image models read about ${limit}, the words after that may be ignored.`;
    } else {
      count.textContent = `${characters} · about ${tokens} of ${limit} tokens`;
    }
  }

  /** Generate needs a backend (the server says, in data-backend-ready) and a prompt. */
  function updateGenerateState() {
    const button = byId('generate');
    const prompt = byId('prompt');
    if (!button || !prompt || button.closest('form')?.classList.contains('htmx-request')) return;
    const empty = prompt.value.trim() === '';
    button.disabled = button.dataset.backendReady !== 'yes' || empty;
    byId('generate-empty').hidden = !empty;
  }

  /** Said to screen readers: the prompt pane changed without the user typing in it. */
  function announcePrompt(text) {
    const region = byId('prompt-announce');
    if (!region) return;
    region.textContent = '';
    // A new text node, a moment later: the same sentence twice in a row is announced twice.
    setTimeout(() => (region.textContent = text), 50);
  }

  /**
   * Follows the prompt however it changes: typing, or a script setting its value (the model's prompt, a
   * suggestion taken, "Use these settings", undo). Setting a textarea's value fires no event, so the
   * element's own `value` setter is wrapped.
   */
  function watchPrompt() {
    const prompt = byId('prompt');
    const own = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value');
    const changed = () => {
      updatePromptCount();
      updateGenerateState();
    };
    Object.defineProperty(prompt, 'value', {
      configurable: true,
      get() {
        return own.get.call(this);
      },
      set(value) {
        const before = own.get.call(this);
        own.set.call(this, value);
        if (before === own.get.call(this)) return;
        changed();
        announcePrompt('The prompt was updated.');
      },
    });
    prompt.addEventListener('input', changed);
    changed();
  }

  // The status line's refresh sets Generate for the backend; the prompt's rule applies again after it.
  document.addEventListener('htmx:after:swap', () => updateGenerateState());

  // ---- A finished image while the tab is in the background: the tab's title says so until it is seen ----

  const READY_TITLE = 'Image ready · ';

  function watchImageFrame() {
    const observer = new MutationObserver(() => {
      if (document.visibilityState !== 'hidden' || !byId('image-frame').querySelector('img')) return;
      if (!document.title.startsWith(READY_TITLE)) document.title = READY_TITLE + document.title;
    });
    observer.observe(byId('image-frame'), { childList: true });
    return observer;
  }

  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && document.title.startsWith(READY_TITLE)) document.title = document.title.slice(READY_TITLE.length);
  });

  /** A suggestion offered beside the user's own prompt is said once (the server replaces #suggestion whole). */
  let announcedSuggestion = '';
  function announceSuggestion() {
    const suggestion = byId('suggestion');
    const text = suggestion && !suggestion.hidden ? byId('suggestion-text').textContent : '';
    if (text && text !== announcedSuggestion) announcePrompt('The assistant suggests another prompt, shown below yours.');
    announcedSuggestion = text;
  }

  const paneFields = { steps: 'setting-steps', cfg: 'setting-cfg', seed: 'setting-seed', negativePrompt: 'setting-negativePrompt' };

  /**
   * Shows the pane the server stored. A field holding typing not saved yet keeps it (its save follows and
   * becomes the newest version), unless the user asked for this change (undo, redo, Use suggestion).
   */
  function applyPane(values) {
    const force = values.force === 'yes';
    const prompt = byId('prompt');
    if (values.prompt !== undefined && (force || !promptState.unsaved)) {
      if (prompt.value !== values.prompt) prompt.value = values.prompt;
      promptState.unsaved = false;
      byId('prompt-error').textContent = '';
    }
    prompt.dataset.version = values.version ?? '';
    for (const [key, id] of Object.entries(paneFields)) {
      const field = byId(id);
      const value = values[key];
      if (!field || value === undefined || dirtySettings.has(field.name)) continue;
      if (field.value !== value) field.value = value;
      const error = byId(`error-${field.name}`);
      if (error) error.textContent = '';
    }
  }

  async function copyPrompt() {
    const prompt = byId('prompt');
    const saved = byId('prompt-saved');
    try {
      await navigator.clipboard.writeText(prompt.value);
      saved.textContent = 'Copied.';
    } catch {
      prompt.select();
      saved.textContent = document.execCommand('copy') ? 'Copied.' : 'Select the prompt and press Ctrl+C to copy it.';
    }
  }

  // Captured, so the sizes are set before the change reaches the form that saves the settings.
  document.addEventListener(
    'change',
    (event) => {
      if (!(event.target instanceof Element) || event.target.id !== 'size-preset') return;
      const [w, h] = event.target.value.split('x');
      if (!w || !h) return;
      byId('setting-width').value = w;
      byId('setting-height').value = h;
    },
    true,
  );

  function matchPreset() {
    const preset = byId('size-preset');
    const value = `${byId('setting-width').value}x${byId('setting-height').value}`;
    preset.value = [...preset.options].some((option) => option.value === value) ? value : '';
  }

  // ---- Large view of an image: its settings, "Use these settings" and "Reuse seed" ----

  const dialog = byId('image-dialog');
  let opener = null;
  let shown = null;

  const isOwnImageUrl = (url) => /^\/images\/[A-Za-z0-9._-]+$/.test(url) && !url.includes('..');

  /** Every value is set with textContent or a checked URL: a prompt stays text, whatever it holds. */
  function showImage(trigger) {
    const data = trigger.dataset;
    if (!isOwnImageUrl(data.url ?? '')) return;
    shown = data;
    const image = byId('image-dialog-img');
    image.src = data.url;
    image.alt = `Image: ${data.prompt ?? ''}`;
    byId('image-dialog-link').href = data.url;
    byId('image-dialog-download').href = data.url;
    byId('image-dialog-download').download = data.download ?? '';
    const fill = (id, value) => {
      byId(`image-dialog-${id}`).textContent = value === undefined || value === '' ? '—' : value;
    };
    fill('prompt', data.prompt);
    fill('negative-prompt', data.negativePrompt);
    fill('steps', data.steps);
    fill('cfg', data.cfg);
    fill('seed', data.seed);
    fill('size', data.width && data.height ? `${data.width} × ${data.height}` : undefined);
    fill('model', data.model);
    // A setting the backend ignored is not recorded; only what is known can be reused.
    byId('use-settings').disabled = data.steps === undefined;
    byId('reuse-seed').disabled = data.seed === undefined;
    opener = trigger;
    dialog.showModal();
  }

  byId('image-dialog-close').addEventListener('click', () => dialog.close());
  // A click on the backdrop (the dialog box itself, outside its inner wrapper) closes it too.
  dialog.addEventListener('click', (event) => {
    if (event.target === dialog) dialog.close();
  });
  dialog.addEventListener('close', () => {
    // A thumbnail replaced while the dialog was open falls back to the big image.
    const target = opener?.isConnected ? opener : document.querySelector('#image-frame [data-image-view]');
    opener = null;
    target?.focus();
  });

  /** Like the user typing into the field: the change event saves it, set by hand. */
  function setSetting(field, value) {
    if (value === undefined) return;
    field.value = value;
    dirtySettings.add(field.name);
    const error = byId(`error-${field.name}`);
    if (error) error.textContent = '';
  }

  byId('use-settings').addEventListener('click', () => {
    if (!shown) return;
    const prompt = byId('prompt');
    prompt.value = shown.prompt ?? '';
    byId('prompt-saved').textContent = '';
    // The user chose this prompt: a version of its own, saved at once.
    promptState.unsaved = true;
    htmx.trigger(prompt, 'easel:save');
    setSetting(byId('setting-steps'), shown.steps);
    setSetting(byId('setting-cfg'), shown.cfg);
    setSetting(byId('setting-seed'), shown.seed);
    setSetting(byId('setting-width'), shown.width);
    setSetting(byId('setting-height'), shown.height);
    setSetting(byId('setting-negativePrompt'), shown.negativePrompt ?? '');
    matchPreset();
    byId('settings-form').dispatchEvent(new Event('change', { bubbles: true }));
    dialog.close();
  });

  byId('reuse-seed').addEventListener('click', () => {
    if (!shown) return;
    const seed = byId('setting-seed');
    setSetting(seed, shown.seed);
    seed.dispatchEvent(new Event('change', { bubbles: true }));
    dialog.close();
  });

  byId('log').dataset.mounted = 'yes';
  mount();
})();
