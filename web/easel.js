// Easel's page behaviour that htmx does not cover. The page runs under a strict CSP, so there are no
// inline handlers and no eval: everything is wired here with addEventListener.
(() => {
  'use strict';

  const byId = (id) => document.getElementById(id);
  const composer = byId('composer');
  if (!composer) return; // not a conversation page

  const message = byId('message');
  const send = byId('send');
  const composerStatus = byId('composer-status');
  const log = byId('log');
  const prompt = byId('prompt');
  const suggestion = byId('suggestion');
  const suggestionText = byId('suggestion-text');
  const promptSaved = byId('prompt-saved');
  const inbox = byId('metadata-inbox');

  /** Each send carries a fresh key; the server refuses a key it has seen, so no reply runs twice. */
  function newSendKey() {
    const bytes = new Uint8Array(18);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  }

  function isStreamSource(elt) {
    return elt instanceof Element && elt.matches('[data-stream]');
  }

  // ---- Composer: Enter sends, Shift+Enter is a new line, empty messages are not sent ----

  message.addEventListener('keydown', (event) => {
    if (event.key !== 'Enter' || event.shiftKey || event.isComposing || event.altKey || event.ctrlKey || event.metaKey) return;
    event.preventDefault();
    if (send.disabled) return;
    composer.requestSubmit();
  });

  let pendingText = '';

  document.addEventListener('htmx:config:request', (event) => {
    const ctx = event.detail.ctx;
    const elt = ctx.sourceElement;
    if (elt instanceof Element && elt.matches('[data-one-shot]')) ctx.request.body.set('sendKey', newSendKey());
    if (!isStreamSource(elt)) return;
    const body = ctx.request.body;
    if (String(body.get('text') ?? '').trim() === '') {
      event.preventDefault();
      composerStatus.textContent = 'Type a message first.';
      message.focus();
      return;
    }
    body.set('sendKey', newSendKey());
    // An edit not saved yet travels with the message, so the model hears of it in this turn.
    if (promptState.unsaved) {
      body.set('prompt', prompt.value);
      promptState.unsaved = false;
    }
  });

  document.addEventListener('htmx:before:request', (event) => {
    const elt = event.detail.ctx.sourceElement;
    if (!isStreamSource(elt)) return;
    composerStatus.textContent = '';
    scrollToEnd();
    if (elt === composer) {
      pendingText = message.value;
      message.value = '';
    }
  });

  document.addEventListener('htmx:finally:request', (event) => {
    const ctx = event.detail.ctx;
    const elt = ctx.sourceElement;
    // A failed image may mean the backend went away: the status line says so at once.
    if (elt instanceof Element && elt.id === 'generate-form') htmx.trigger(document.body, 'easel:status');
    if (!isStreamSource(elt)) return;
    const status = ctx.response?.status;
    // The user's text is never lost: a send that did not start puts it back.
    if (elt === composer && status !== 200 && message.value === '') message.value = pendingText;
    if (status === undefined && composerStatus.textContent === '') {
      composerStatus.textContent = 'Could not reach Easel. Is it still running? Your text is kept.';
    }
    if (status === 200 && elt.matches('form.retry')) elt.remove();
    for (const dots of log.querySelectorAll('.typing')) dots.remove();
    if (promptState.resave) {
      promptState.resave = false;
      htmx.trigger(prompt, 'easel:save');
    }
    htmx.trigger(document.body, 'easel:status');
  });

  // ---- Chat log: follow new text only while the reader is at the bottom ----

  // Measured against the height before the change, and read now rather than from a scroll event
  // (those arrive a frame late): a reader who just scrolled up is never pulled back down.
  let knownHeight = 0;
  const scrollToEnd = () => {
    log.scrollTop = log.scrollHeight;
    knownHeight = log.scrollHeight;
  };
  new MutationObserver(() => {
    const wasAtBottom = knownHeight - log.scrollTop - log.clientHeight < 40;
    if (wasAtBottom) log.scrollTop = log.scrollHeight;
    knownHeight = log.scrollHeight;
  }).observe(log, { childList: true, subtree: true, characterData: true });
  scrollToEnd();

  // ---- Prompt pane: the user's edits win over the model's suggestions ----

  const promptState = { edited: false, unsaved: false, resave: false, sending: null };

  prompt.addEventListener('input', () => {
    promptState.edited = true;
    promptState.unsaved = true;
    promptSaved.textContent = '';
  });

  document.addEventListener('htmx:config:request', (event) => {
    const ctx = event.detail.ctx;
    if (ctx.sourceElement === prompt) promptState.sending = String(ctx.request.body.get('prompt') ?? '');
  });

  document.addEventListener('htmx:after:request', (event) => {
    const ctx = event.detail.ctx;
    if (ctx.sourceElement !== prompt || ctx.response?.status !== 200) return;
    if (prompt.value === promptState.sending) promptState.unsaved = false;
  });

  function showSuggestion(text) {
    suggestionText.textContent = text;
    suggestion.hidden = false;
  }

  function hideSuggestion() {
    suggestion.hidden = true;
    suggestionText.textContent = '';
  }

  byId('use-suggestion').addEventListener('click', () => {
    prompt.value = suggestionText.textContent;
    hideSuggestion();
    promptState.edited = false;
    promptState.unsaved = true;
    htmx.trigger(prompt, 'easel:save');
    prompt.focus();
  });

  byId('dismiss-suggestion').addEventListener('click', () => {
    hideSuggestion();
    prompt.focus();
  });

  byId('copy-prompt').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(prompt.value);
      promptSaved.textContent = 'Copied.';
    } catch {
      prompt.select();
      promptSaved.textContent = document.execCommand('copy') ? 'Copied.' : 'Select the prompt and press Ctrl+C to copy it.';
    }
  });

  function applyPrompt(suggested) {
    if (suggested === '' || suggested === prompt.value) {
      if (suggested !== '') hideSuggestion();
      return;
    }
    const editing = document.activeElement === prompt;
    if (promptState.edited || editing) {
      showSuggestion(suggested);
      // The server stored the model's prompt; saving the text on screen keeps both in step.
      promptState.resave = true;
    } else {
      prompt.value = suggested;
      hideSuggestion();
    }
    if (!editing) promptState.edited = false;
  }

  // ---- Settings: the model's values fill the fields the user is not editing ----

  const settingsFields = { steps: 'setting-steps', cfg: 'setting-cfg', seed: 'setting-seed', negativePrompt: 'setting-negativePrompt' };

  function applySettings(values) {
    for (const [key, id] of Object.entries(settingsFields)) {
      const field = byId(id);
      const value = values[key];
      if (!field || value === undefined || document.activeElement === field) continue;
      field.value = value;
      const error = byId(`error-${field.name}`);
      if (error) error.textContent = '';
    }
  }

  new MutationObserver(() => {
    const carrier = inbox.querySelector('.metadata');
    if (!carrier) return;
    const data = carrier.dataset;
    inbox.replaceChildren();
    applyPrompt(data.prompt ?? '');
    applySettings({ steps: data.steps, cfg: data.cfg, seed: data.seed, negativePrompt: data.negativePrompt });
  }).observe(inbox, { childList: true });

  const seed = byId('setting-seed');
  byId('random-seed').addEventListener('click', () => {
    seed.value = '-1';
    seed.dispatchEvent(new Event('change', { bubbles: true }));
  });

  const preset = byId('size-preset');
  const width = byId('setting-width');
  const height = byId('setting-height');
  // Runs on the select itself, before the change bubbles to the form that saves the settings.
  preset.addEventListener('change', () => {
    const [w, h] = preset.value.split('x');
    if (!w || !h) return;
    width.value = w;
    height.value = h;
  });
  const matchPreset = () => {
    const value = `${width.value}x${height.value}`;
    preset.value = [...preset.options].some((option) => option.value === value) ? value : '';
  };
  width.addEventListener('input', matchPreset);
  height.addEventListener('input', matchPreset);

  // ---- Large view of an image: its settings, "Use these settings" and "Reuse seed" ----

  const dialog = byId('image-dialog');
  const settingsForm = byId('settings-form');
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

  document.addEventListener('click', (event) => {
    const trigger = event.target instanceof Element ? event.target.closest('[data-image-view]') : null;
    if (!trigger) return;
    event.preventDefault();
    showImage(trigger);
  });

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

  /** Like the user typing into the field: the change event saves the whole settings form. */
  function setSetting(field, value) {
    if (value === undefined) return;
    field.value = value;
    const error = byId(`error-${field.name}`);
    if (error) error.textContent = '';
  }

  byId('use-settings').addEventListener('click', () => {
    if (!shown) return;
    prompt.value = shown.prompt ?? '';
    hideSuggestion();
    promptSaved.textContent = '';
    // The user chose this prompt: later suggestions are offered beside it, not written over it.
    promptState.edited = true;
    promptState.unsaved = true;
    htmx.trigger(prompt, 'easel:save');
    setSetting(byId('setting-steps'), shown.steps);
    setSetting(byId('setting-cfg'), shown.cfg);
    setSetting(seed, shown.seed);
    setSetting(width, shown.width);
    setSetting(height, shown.height);
    setSetting(byId('setting-negativePrompt'), shown.negativePrompt ?? '');
    matchPreset();
    settingsForm.dispatchEvent(new Event('change', { bubbles: true }));
    dialog.close();
  });

  byId('reuse-seed').addEventListener('click', () => {
    if (!shown) return;
    setSetting(seed, shown.seed);
    seed.dispatchEvent(new Event('change', { bubbles: true }));
    dialog.close();
  });

  // A message next to a field also marks the field invalid for assistive technology.
  const markInvalid = () => {
    for (const slot of document.querySelectorAll('.field-error[id^="error-"]')) {
      const field = byId(`setting-${slot.id.slice('error-'.length)}`);
      if (field) field.setAttribute('aria-invalid', slot.textContent.trim() ? 'true' : 'false');
    }
    prompt.setAttribute('aria-invalid', byId('prompt-error').textContent.trim() ? 'true' : 'false');
  };
  const invalidObserver = new MutationObserver(markInvalid);
  for (const region of [byId('settings-form'), byId('prompt-error')]) {
    invalidObserver.observe(region, { childList: true, subtree: true, characterData: true });
  }
})();
