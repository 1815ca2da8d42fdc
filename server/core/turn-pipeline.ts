// A turn from the message to its image: begin (the message and its context stored in one transaction, before
// Ollama is asked) → run (the reply and the recovery ladder) → finish (the reply, the pane and the context
// stored) → the pane's change → the automatic image. The working context is computed once, here.
import { FAMILY_STYLES, fitMetadataToFamily, formatUserNote, type ContextEntry, type FamilyStyle } from '../protocol/index.ts';
import { appendUserEntry, describeContextChange, dropTrailingReplies, rewindToBefore } from './context-change.ts';
import type { StartedTurn } from './conversation.ts';
import { isLoggedByStore, isStorageError } from './errors.ts';
import { applyShownText, isShownTextEvent, type DoneEvent, type TurnEvent } from './events.ts';
import type { ImageActivity } from './image-activities.ts';
import { describeStorageFailure } from './library.ts';
import { applyReplyPane, decideReplyImage, decideReplyPane, describeFamily, type PinnableField } from './pane.ts';
import { createReplySaver } from './reply-saver.ts';
import type { ReplyTimeouts } from './reply-watchdog.ts';
import { runTurn, type TurnOutcome } from './run-turn.ts';
import { paneStateOf, sameSettings, type ServiceState } from './service-state.ts';
import { DEFAULT_SETTINGS, type Settings } from './settings.ts';

/** How often the text of a streaming reply is saved: a crash loses at most this much of it. */
export const REPLY_SAVE_INTERVAL_MS = 1000;

/** What a turn does, decided when it is asked for. */
export interface TurnPlan {
  kind: 'send' | 'edit' | 'regenerate';
  /** The user's message (for Regenerate: the last one, asked again). */
  text: string;
  /** Edit: the text of the message it replaces (found in the working context to rewind it). */
  replacedText?: string;
  /** Turns marked `replaced` in the transaction that starts this one. */
  replaces: number[];
  /** The conversation is created by this message, with these. */
  create?: { prompt: string; settings: Settings; pinned: PinnableField[] };
}

export const FAILED_DONE: DoneEvent = { type: 'done', attempts: 0, repairs: [], level: 'error', evalCount: 0, tokensPerSecond: 0, firstTokenMs: null };

/**
 * The pipeline of one turn: its events, and the automatic image it started, if any (that image runs on after
 * the reply's `done`, as an activity of its own).
 */
export function createTurnPipeline(
  state: ServiceState,
  replyTimeouts: ReplyTimeouts,
): (id: string, plan: TurnPlan, controller: AbortController) => AsyncGenerator<TurnEvent, ImageActivity | undefined> {
  /**
   * The family the reply writes for: chosen, or read from the checkpoint's name. When nothing says it, the
   * system prompt stays the one for any image model rather than guessing a style.
   */
  function familyOf(settings: Settings): { family?: FamilyStyle } {
    const family = describeFamily(settings, state.catalog.serverCheckpoint());
    return family.source === 'fallback' ? {} : { family: FAMILY_STYLES[family.id] };
  }

  const { deps, findRecord, logStorageFailure, isoNow, describePane, activities } = state;
  return async function* runPipeline(id: string, plan: TurnPlan, controller: AbortController): AsyncGenerator<TurnEvent, ImageActivity | undefined> {
    const record = findRecord(id);
    if (!record && !plan.create) {
      yield { type: 'error', code: 'not_found', message: 'This conversation was deleted; your message was not sent. Start a new conversation.' };
      yield FAILED_DONE;
      return;
    }
    const base = record ?? {
      // Stryker disable next-line StringLiteral: the plan of a new conversation always carries its prompt
      prompt: plan.create?.prompt ?? '',
      settings: plan.create?.settings ?? DEFAULT_SETTINGS,
      // What the user set on the empty page, the model hears with the first message.
      // Stryker disable next-line StringLiteral: the plan of a new conversation always carries its prompt
      pending: { promptEdited: (plan.create?.prompt ?? '') !== '', settingsChanged: !sameSettings(plan.create?.settings ?? DEFAULT_SETTINGS, DEFAULT_SETTINGS) },
    };
    // From here until beginTurn nothing awaits: the context read and the transaction see the same state.
    const stored = record ? deps.store.readContext(id) : [];
    let prior: ContextEntry[];
    let carriedNote: string | undefined;
    // Stryker disable next-line StringLiteral: an Edit's plan always carries the replaced text
    if (plan.kind === 'edit') ({ context: prior, note: carriedNote } = rewindToBefore(stored, plan.replacedText ?? ''));
    else if (plan.kind === 'regenerate') prior = dropTrailingReplies(stored);
    else prior = stored.slice();
    // Stryker disable next-line ConditionalExpression: `in` only narrows the type (a new conversation's pending has no such key)
    const compared = 'compared' in base.pending ? base.pending.compared : undefined;
    const pendingNote = formatUserNote({
      ...(base.pending.promptEdited ? { editedPrompt: base.prompt } : {}),
      ...(base.pending.settingsChanged ? { settings: base.settings } : {}),
      ...(compared === undefined ? {} : { compared }),
    });
    const note = [carriedNote, pendingNote].filter(Boolean).join('\n') || undefined;
    // Stryker disable next-line ObjectLiteral: the turn's end writes the context it built, note included (runTurn adds it): only the rows written between differ
    const turnContext = appendUserEntry(prior, { kind: 'user', text: plan.text, ...(note ? { note } : {}) });
    let started: StartedTurn;
    try {
      started = deps.store.beginTurn(
        id,
        {
          ...(plan.create ? { create: { createdAt: isoNow(), ...plan.create } } : {}),
          ...(plan.kind === 'regenerate' ? {} : { user: { text: plan.text } }),
          replaces: plan.replaces,
          context: describeContextChange(stored, turnContext),
        },
        isoNow(),
      );
    } catch (error) {
      if (!isStorageError(error)) throw error;
      logStorageFailure('the message could not be stored; nothing was sent to the model', error, { conversationId: id });
      yield { type: 'error', ...describeStorageFailure(error, plan.kind === 'regenerate' ? 'change' : 'message') };
      yield FAILED_DONE;
      return;
    }
    yield { type: 'started', conversationId: id, turnId: started.turnId, userTurnId: started.userTurnId, replaces: plan.replaces };

    const saver = createReplySaver({
      save: (text) => deps.store.saveReplyText(started.turnId, text),
      onError: (error) => {
        // A vanished or damaged database is logged once by the store; a save a second would repeat it.
        if (isLoggedByStore(error)) return;
        deps.logger.warn('the reply could not be saved while streaming', { conversationId: id, error });
      },
      intervalMs: deps.replySaveIntervalMs ?? REPLY_SAVE_INTERVAL_MS,
      now: deps.clock.now,
    });
    const turn = runTurn(
      { llm: deps.llm, logger: deps.logger, now: deps.clock.now, numCtx: deps.numCtx, conversationId: id, timeouts: replyTimeouts },
      { context: turnContext, prompt: base.prompt, settings: base.settings, signal: controller.signal, ...familyOf(base.settings) },
    );
    let shown = '';
    let outcome: TurnOutcome;
    try {
      let step = await turn.next();
      while (!step.done) {
        const event = step.value;
        // The shown text, as the page and API show it: saved as it streams.
        shown = applyShownText(shown, event);
        // Stryker disable next-line ConditionalExpression: finishTurn writes the shown words with no I/O between; told more often, the saver still writes at most once per interval
        if (isShownTextEvent(event)) saver.update(shown);
        yield event;
        step = await turn.next();
      }
      // Stryker disable BlockStatement: the finally below emptied: the last pending save holds the words the turn stores, and the store writes a reply's text only while it runs
      outcome = step.value;
    } finally {
      // Stryker restore BlockStatement
      saver.stop();
    }
    // Read, decided and written without an await in between: no edit can slip between the three.
    const before = deps.store.getConversation(id);
    // Fitted to the family that paints now: a checkpoint changed while the reply was written wins over the one it began with.
    const family = before ? familyOf(before.settings).family : undefined;
    const metadata = outcome.metadata && family ? fitMetadataToFamily(outcome.metadata, family) : outcome.metadata;
    const change = metadata && before ? decideReplyPane(paneStateOf(before), metadata, started.promptVersion, started.turnId) : undefined;
    const after = change && before ? applyReplyPane(paneStateOf(before), change) : undefined;
    const decision = metadata && after ? decideReplyImage(metadata, after, deps.images.configured) : { kind: 'none' as const };
    try {
      deps.store.finishTurn(
        id,
        {
          turnId: started.turnId,
          turn: outcome.turn,
          context: describeContextChange(turnContext, outcome.context),
          ...(change ? { pane: change } : {}),
          ...(decision.kind === 'skip' ? { imageNote: { reason: decision.reason, message: decision.message } } : {}),
        },
        isoNow(),
      );
    } catch (error) {
      if (!isStorageError(error)) throw error;
      logStorageFailure('the reply could not be stored', error, { conversationId: id });
      yield { type: 'error', ...describeStorageFailure(error, 'reply') };
      yield { ...outcome.done, level: 'error' };
      return;
    }
    const latest = deps.store.getConversation(id);
    if (change && latest) yield { type: 'pane', ...describePane(latest) };
    if (decision.kind === 'skip') yield { type: 'image_not_made', reason: decision.reason, message: decision.message };
    if (decision.kind === 'make' && latest && !controller.signal.aborted) {
      // Exactly what the pane shows now; what changes in the pane later never reaches this image.
      const begun = await activities.start({
        conversationId: id,
        turnId: started.turnId,
        prompt: latest.prompt,
        settings: latest.settings,
        promptVersion: latest.promptVersion,
      });
      if (begun.ok) {
        yield outcome.done;
        return begun.activity;
      }
      yield begun.event;
    }
    yield outcome.done;
    return undefined;
  };

}
