// The prompt pane and the settings as the user changes them: a typed prompt is a new version, undo and redo
// move between versions, the model's waiting suggestion is taken or let go, settings set by hand are pinned.
import { findRedoVersion, findUndoVersion, isPinnableField, PINNABLE_FIELDS, type PaneView, type PinnableField, type PromptVersion } from './pane.ts';
import { invalid, notFound, refuse, type Result } from './results.ts';
import type { ServiceState } from './service-state.ts';
import { settingsPatchSchema, type Settings } from './settings.ts';
import { promptSchema } from './text.ts';
import type { ConversationRecord } from './conversation.ts';

/** What the user's screen shows and has not saved yet: saved first, so the command acts on what they see. */
export interface OnScreen {
  prompt?: unknown;
  /** The pane revision the screen shows: a change from an older one is refused as 'stale' (absent: no check). */
  baseRevision?: unknown;
}

export interface SettingsOptions {
  /** Only these fields were changed by the user (a form sends them all): the others are left as stored, unpinned. */
  only?: readonly string[];
  /** As OnScreen's. */
  baseRevision?: unknown;
}

export interface PaneCommands {
  /** The user's prompt: a new version (none when it is the current text already). */
  setPrompt(id: string, prompt: unknown, onScreen?: OnScreen): Result<PaneView>;
  /**
   * The user's settings: every model-proposed field given (steps, cfg, seed, negativePrompt) is pinned;
   * `unpin: [field…]` lets fields follow the model again (taking its waiting value).
   */
  setSettings(id: string, patch: unknown, options?: SettingsOptions): Result<Settings>;
  /** The pane as stored, with what undo and redo would do. */
  getPane(id: string): PaneView | undefined;
  /** Every version of the prompt, oldest first. */
  listPromptVersions(id: string): PromptVersion[] | undefined;
  /** Back to the version the current one was changed from ('conflict' when there is none). */
  undoPrompt(id: string, onScreen?: OnScreen): Result<PaneView>;
  /** Forward to the newest version changed from the current one ('conflict' when there is none). */
  redoPrompt(id: string, onScreen?: OnScreen): Result<PaneView>;
  /** "Use suggestion" (true) or "Keep mine" (false) for the model's waiting prompt ('conflict' when none waits). */
  answerSuggestion(id: string, accept: unknown, onScreen?: OnScreen): Result<PaneView>;
  /** Takes the model's waiting value for a pinned setting: set by hand, so it stays pinned. */
  takeSettingSuggestion(id: string, field: unknown, onScreen?: OnScreen): Result<PaneView>;
  /**
   * "This one" under a comparison: version `promptVersion` was chosen `over` the other. Its prompt becomes the
   * current one (a new `user` version, one undo away, unless it is the current text already), and the next
   * message tells the model which prompt won and what differed.
   */
  pickComparedPrompt(id: string, promptVersion: unknown, over: unknown, onScreen?: OnScreen): Result<PaneView>;
}

export function createPaneCommands(state: ServiceState): PaneCommands {
  const { deps, findRecord, tryWrite, paneOf, describePane } = state;

  /** Moves the prompt to another stored version (undo, redo). */
  function movePrompt(id: string, pick: (record: ConversationRecord) => number | null, nothing: string): Result<PaneView> {
    const record = findRecord(id);
    if (!record) return notFound(id);
    const target = pick(record);
    if (target === null) return refuse('conflict', nothing);
    const moved = tryWrite('change', () => deps.store.selectPromptVersion(id, target));
    return moved.ok ? paneOf(id) : moved;
  }

  function setPrompt(id: string, prompt: unknown, onScreen?: OnScreen): Result<PaneView> {
    const record = findRecord(id);
    if (!record) return notFound(id);
    const base = state.checkBase(id, onScreen?.baseRevision);
    if (!base.ok) return base;
    const parsed = promptSchema.safeParse(prompt);
    if (!parsed.success) return invalid(parsed.error, 'prompt');
    const saved = state.saveScreenPrompt(id, parsed.data, 'change');
    return saved.ok ? paneOf(id) : saved;
  }

  /** The prompt on screen saved first (see saveScreenPrompt), then `then`. */
  function afterScreen(id: string, onScreen: OnScreen | undefined, then: () => Result<PaneView>): Result<PaneView> {
    // Checked before anything is saved: a stale screen changes nothing.
    const base = state.checkBase(id, onScreen?.baseRevision);
    if (!base.ok) return base;
    if (onScreen?.prompt !== undefined) {
      const saved = state.saveScreenPrompt(id, onScreen.prompt, 'change');
      if (!saved.ok) return saved;
    }
    return then();
  }

  function answerSuggestion(id: string, accept: unknown): Result<PaneView> {
    const record = findRecord(id);
    if (!record) return notFound(id);
    if (typeof accept !== 'boolean') {
      return refuse('invalid', 'accept must be true (use the suggestion) or false (keep yours).', { accept: 'accept must be true or false.' });
    }
    const suggestion = record.suggestion;
    if (!suggestion) return refuse('conflict', 'No suggestion is waiting: the prompt is as shown.');
    const answered = tryWrite('change', () => {
      // The model's own prompt: nothing new to tell it. Keeping yours leaves your edit's note for the next message.
      if (accept) deps.store.takeSuggestion(id, suggestion, state.isoNow());
      else deps.store.setSuggestion(id, null);
    });
    return answered.ok ? paneOf(id) : answered;
  }

  /** The version chosen in a comparison becomes the prompt, and the model hears which won over which. */
  function pickCompared(id: string, promptVersion: unknown, over: unknown): Result<PaneView> {
    const read = (value: unknown, field: string): Result<PromptVersion> => {
      const version = typeof value === 'number' && Number.isInteger(value) ? deps.store.getPromptVersion(id, value) : undefined;
      if (version) return { ok: true, value: version };
      const message = `${field} must be the id of a prompt version of this conversation${value === undefined ? '' : `; there is no version ${JSON.stringify(value)}`} (GET the conversation: its promptVersions list them).`;
      return refuse('invalid', message, { [field]: message });
    };
    const chosen = read(promptVersion, 'promptVersion');
    if (!chosen.ok) return chosen;
    const other = read(over, 'over');
    if (!other.ok) return other;
    if (chosen.value.id === other.value.id) return refuse('invalid', 'promptVersion and over must be the two different versions that were compared.', { over: 'The same version as promptVersion.' });
    const picked = tryWrite('change', () => deps.store.pickComparedPrompt(id, { chosen: chosen.value.prompt, over: other.value.prompt }, state.isoNow()));
    return picked.ok ? paneOf(id) : picked;
  }

  return {
    setPrompt,

    setSettings(id, patch, options = {}) {
      const record = findRecord(id);
      if (!record) return notFound(id);
      const base = state.checkBase(id, options.baseRevision);
      if (!base.ok) return base;
      const unpin = readUnpin(patch);
      if (!unpin.ok) return unpin;
      const only = options.only === undefined ? undefined : new Set(options.only);
      const values = isRecord(patch) ? Object.fromEntries(Object.entries(patch).filter(([key]) => key !== 'unpin' && (only === undefined || only.has(key)))) : patch;
      const parsed = settingsPatchSchema.safeParse(values);
      if (!parsed.success) return invalid(parsed.error);
      // A model, checkpoint or sampler the server did not list is refused before anything is stored.
      const choice = state.catalog.checkChoice(parsed.data);
      if (!choice.ok) return choice;
      const saved = tryWrite('change', () => state.saveUserSettings(record, { ...parsed.data, ...choice.value }, unpin.value));
      return saved.ok ? { ok: true, value: saved.value.settings } : saved;
    },

    getPane(id) {
      const record = findRecord(id);
      return record ? describePane(record) : undefined;
    },

    listPromptVersions(id) {
      return findRecord(id) ? deps.store.listPromptVersions(id) : undefined;
    },

    undoPrompt(id, onScreen) {
      return afterScreen(id, onScreen, () => movePrompt(
        id,
        (record) => findUndoVersion(record.promptVersion === null ? undefined : deps.store.getPromptVersion(id, record.promptVersion)),
        'There is nothing to undo: this is the first version of the prompt.',
      ));
    },

    redoPrompt(id, onScreen) {
      return afterScreen(id, onScreen, () => movePrompt(
        id,
        (record) => (record.promptVersion === null ? null : findRedoVersion(deps.store.listPromptVersionChildren(id, record.promptVersion))),
        'There is nothing to redo: this is the newest version of the prompt.',
      ));
    },

    answerSuggestion(id, accept, onScreen) {
      // Typing not saved yet becomes a version before "Use suggestion" replaces it: one undo brings it back.
      return afterScreen(id, accept === true ? onScreen : { baseRevision: onScreen?.baseRevision }, () => answerSuggestion(id, accept));
    },

    pickComparedPrompt(id, promptVersion, over, onScreen) {
      if (!findRecord(id)) return notFound(id);
      // What the screen shows is saved first, as for undo: the pick is one undo away from the user's own typing.
      return afterScreen(id, onScreen, () => pickCompared(id, promptVersion, over));
    },

    takeSettingSuggestion(id, field, onScreen) {
      const record = findRecord(id);
      if (!record) return notFound(id);
      const base = state.checkBase(id, onScreen?.baseRevision);
      if (!base.ok) return base;
      if (!isPinnableField(field)) return refuse('invalid', `${String(field)} is not a setting the assistant suggests (${PINNABLE_FIELDS.join(', ')}).`);
      const value = record.settingSuggestions[field];
      if (value === undefined) return refuse('conflict', `The assistant suggests nothing for ${field} now.`);
      const taken = tryWrite('change', () => state.saveUserSettings(record, { [field]: value }, []));
      return taken.ok ? paneOf(id) : taken;
    },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  // Stryker disable next-line LogicalOperator: a JSON array has no unpin key, so it is read as none and the settings schema refuses it
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `unpin`: a list of the settings the model may set again. */
function readUnpin(patch: unknown): Result<PinnableField[]> {
  const unpin = isRecord(patch) ? patch['unpin'] : undefined;
  if (unpin === undefined) return { ok: true, value: [] };
  if (!Array.isArray(unpin) || !unpin.every(isPinnableField)) {
    const message = `unpin must be a list of ${PINNABLE_FIELDS.join(', ')}.`;
    return refuse('invalid', message, { unpin: message });
  }
  return { ok: true, value: unpin };
}
