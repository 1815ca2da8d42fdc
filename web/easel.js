// Easel's page behaviour that htmx does not cover. The page runs under a strict CSP (script-src 'self'), so
// there are no inline handlers and no eval: everything is wired with addEventListener, in ES modules the
// server serves itself, with no build step. This is the entry (<script type="module" src="/assets/easel.js">);
// its modules live in web/js/, one concept each, and are served beside it as /assets/<name>.js, hence the
// './name.js' imports (tsconfig.json's rootDirs shows the type checker web/ and web/js/ as one folder).
import { onComposerClick, onSendBeforeRequest, onSendConfigRequest, onSendFinished, watchComposerInbox } from './composer.js';
import { showConversation } from './conversation.js';
import { onDescribeChange, onDescribeDrop, onDescribeFinished, onDescribePaste } from './describe.js';
import { onImageClick, wireImageDialog } from './dialog.js';
import { startGallery } from './gallery.js';
import { byId } from './dom.js';
import { onEditClick } from './edit.js';
import { onGenerateConfigRequest, onGenerateFinished, updateGenerateState } from './generate.js';
import { onBeforeInput, onKeyDown } from './keys.js';
import { onImportChange, onImportFinished, onLibraryClick, watchLibraryTimes } from './library.js';
import { onLiveConfigRequest } from './live.js';
import { onMessageClick } from './messages.js';
import { onModelsChange, onModelsClick, onPullBeforeRequest, onPullFinished } from './models.js';
import { onPromptAfterRequest, onPromptClick, onPromptConfigRequest, onPromptInput } from './prompt.js';
import { onPromptCueClick } from './prompt-cue.js';
import { onDragLeave, onDragOver, onDrop, onPaste, onReferenceChange, onReferenceFinished } from './reference.js';
import { onRenameClick } from './rename.js';
import { keyOneShot } from './send-key.js';
import { applySizePreset, markChangedSetting, onSettingsAfterRequest, onSettingsClick, onSettingsConfigRequest, onSettingsInput } from './settings.js';
import { onVisibilityChange } from './tab-title.js';

if (byId('composer')) start();
else if (byId('gallery')) startGallery(); // the gallery's own page (web/js/gallery.js)

function start() {
  // Every listener on the document is added here, one per event type, calling the modules' handlers in the
  // order written: what an event does is read in one place, and that order never depends on which module
  // was imported first. They are on the document because switching conversations swaps #conversation in
  // place: its elements are looked up when an event comes, never kept.

  document.addEventListener('htmx:config:request', (event) => {
    onPromptConfigRequest(event);
    onSettingsConfigRequest(event);
    onGenerateConfigRequest(event);
    keyOneShot(event.detail.ctx);
    onSendConfigRequest(event);
    onLiveConfigRequest(event);
  });
  document.addEventListener('htmx:before:request', (event) => {
    onSendBeforeRequest(event.detail.ctx);
    onPullBeforeRequest(event.detail.ctx);
  });
  document.addEventListener('htmx:after:request', (event) => {
    onSettingsAfterRequest(event.detail.ctx);
    onPromptAfterRequest(event.detail.ctx);
  });
  document.addEventListener('htmx:finally:request', (event) => {
    onGenerateFinished(event.detail.ctx);
    onSendFinished(event.detail.ctx);
    onImportFinished(event.detail.ctx);
    onReferenceFinished(event.detail.ctx);
    onDescribeFinished(event.detail.ctx);
    onPullFinished(event.detail.ctx);
  });
  document.addEventListener('htmx:after:swap', () => {
    // A switch from the library replaced the conversation: mount what is shown now.
    showConversation();
    // The status line's refresh sets Generate for the backend; the prompt's rule applies again after it.
    updateGenerateState();
  });

  document.addEventListener('click', (event) => {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    onLibraryClick(target);
    onMessageClick(target);
    onEditClick(target);
    onComposerClick(target);
    onRenameClick(target);
    onPromptClick(target);
    onPromptCueClick(target);
    onSettingsClick(target);
    onImageClick(target, event);
    onModelsClick(target, event);
  });
  document.addEventListener('input', (event) => {
    onPromptInput(event);
    onSettingsInput(event);
  });
  // Captured: a field is marked changed, and a size preset's width and height set, before the change reaches
  // the settings form, which saves on it (hx-trigger="change").
  document.addEventListener(
    'change',
    (event) => {
      // First: the pull's name field is among the settings, but its change is not theirs to save.
      onModelsChange(event);
      markChangedSetting(event);
      applySizePreset(event);
      onImportChange(event);
      onReferenceChange(event);
      onDescribeChange(event);
    },
    true,
  );
  document.addEventListener('keydown', onKeyDown);
  document.addEventListener('beforeinput', onBeforeInput, true);
  document.addEventListener('visibilitychange', onVisibilityChange);
  // A picture dropped or pasted onto the prompt pane is described (web/js/describe.js); anywhere else on the page it
  // is a reference image (web/js/reference.js).
  document.addEventListener('dragover', onDragOver);
  document.addEventListener('dragleave', onDragLeave);
  document.addEventListener('dragend', onDragLeave);
  document.addEventListener('drop', (event) => {
    onDescribeDrop(event);
    onDrop(event);
  });
  document.addEventListener('paste', (event) => {
    onDescribePaste(event);
    onPaste(event);
  });

  // Outside #conversation, so once for the page.
  watchLibraryTimes();
  watchComposerInbox();
  wireImageDialog();
  showConversation();
}
