// The opt-in loop of look and correct: with `autoCheck`, every new picture is checked by the vision model; with
// `autoRefine` (1–3), a single picture whose check found misses is made again on its seed from the revised prompt
// (Fix and regenerate), and that one is checked in turn, until nothing is missed, the rounds are used up, or the
// user touches the pane. Each check and picture goes to every page like any other (critique, generation events);
// Cancel of the conversation's images ends the loop; each check is bounded in time (VISION_TIMEOUT_MS) and calls (2).
import type { ConversationRecord } from './conversation.ts';
import type { TurnEvent } from './events.ts';
import type { Logger } from './logger.ts';
import type { Result } from './results.ts';
import type { ServiceState } from './service-state.ts';
import type { VisionCommands } from './vision-commands.ts';

export interface RefineLoopDeps {
  state: ServiceState;
  vision: VisionCommands;
  /** Generate with `fix`: the corrected picture (the service's generate, the image outliving any reader). */
  makeCorrected(conversationId: string, imageId: string): Result<AsyncIterable<TurnEvent>>;
  logger: Logger;
}

export interface RefineLoop {
  /** Ends the conversation's checks in flight (Cancel of its images); a picture being made is cancelled apart. */
  cancel(conversationId: string): boolean;
  /** Ends every check (shutdown); resolves once each loop has stopped. */
  stopAll(): Promise<void>;
}

export function createRefineLoop(deps: RefineLoopDeps): RefineLoop {
  const { state, vision, logger } = deps;
  /** The round of each corrected picture's generation (1 for the first correction): the loop's own. */
  const rounds = new Map<string, number>();
  /** The pane revision when each generation began: a change after it means the user touched the pane. */
  const startedAt = new Map<string, number>();
  /** Each conversation's checks in flight, to cancel them. */
  const checks = new Map<string, Set<AbortController>>();
  const loops = new Set<Promise<void>>();
  let stopped = false;

  state.watchImages((activity, event) => {
    if (event.type === 'generation') {
      const record = state.findRecord(activity.conversationId);
      if (record) startedAt.set(activity.id, record.paneRevision);
      return;
    }
    if (event.type === 'error') forget(activity.id);
    if (event.type !== 'image') return;
    const round = rounds.get(activity.id) ?? 0;
    const since = startedAt.get(activity.id);
    // Forgotten at its first image, whatever follows (autoCheck off, shutdown): only a single picture is corrected,
    // so a batch's or a comparison's later pictures never need its round or start.
    forget(activity.id);
    const record = state.findRecord(activity.conversationId);
    if (stopped || !record?.settings.autoCheck) return;
    // A batch or a comparison is for choosing among pictures: each is checked, none is corrected on its own.
    const single = event.batch === undefined && event.compare === undefined;
    const mayCorrect = single && round < record.settings.autoRefine;
    const loop = runRound(activity.conversationId, event.id, round, mayCorrect ? since : undefined).catch((error: unknown) => {
      logger.error('the check-and-correct loop failed', { conversationId: activity.conversationId, imageId: event.id, error });
    });
    loops.add(loop);
    void loop.finally(() => loops.delete(loop));
  });

  function forget(generationId: string): void {
    rounds.delete(generationId);
    startedAt.delete(generationId);
  }

  /** Checks one picture; corrects it when allowed (`since`: the pane revision its generation began at). */
  async function runRound(conversationId: string, imageId: string, round: number, since: number | undefined): Promise<void> {
    const controller = new AbortController();
    const running = checks.get(conversationId) ?? new Set();
    checks.set(conversationId, running);
    running.add(controller);
    let misses = 0;
    try {
      const checked = await vision.checkImage(conversationId, imageId, { signal: controller.signal });
      if (!checked.ok) {
        // Said to every page under the picture, where a check the user asked for says it too.
        state.feed.publish(conversationId, { type: 'check_failed', imageId, code: checked.error.code, message: checked.error.message });
        return;
      }
      const before = state.findRecord(conversationId);
      for await (const event of checked.value) {
        if (event.type === 'critique') misses = event.misses.length;
      }
      // The user touched the pane while the picture was made or checked: theirs wins, nothing is made.
      if (since === undefined || misses === 0 || controller.signal.aborted || !before || before.paneRevision !== since) return;
      const after = state.findRecord(conversationId);
      if (!after || !isSamePane(before, after, imageId)) return;
    } finally {
      running.delete(controller);
      if (running.size === 0) checks.delete(conversationId);
    }
    if (stopped) return;
    const corrected = deps.makeCorrected(conversationId, imageId);
    if (!corrected.ok) {
      logger.warn('the corrected picture could not be started', { conversationId, imageId, reason: corrected.error.message });
      return;
    }
    // Read to its end: its events reach every page through the conversation's feed; here only its id matters.
    for await (const event of corrected.value) {
      if (event.type === 'generation') rounds.set(event.id, round + 1);
    }
  }

  return {
    cancel(conversationId) {
      const running = checks.get(conversationId);
      if (!running || running.size === 0) return false;
      // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a cancel
      for (const controller of running) controller.abort(new Error('cancelled by the user'));
      return true;
    },
    async stopAll() {
      stopped = true;
      // Stryker disable next-line StringLiteral: no reader shows an abort reason's words: any abort is a cancel
      for (const running of checks.values()) for (const controller of running) controller.abort(new Error('Easel is shutting down'));
      await Promise.all(loops);
    },
  };
}

/**
 * Whether the pane is as the check found it: the same prompt and settings, and no suggestion but the check's own
 * (which is all the check itself may have changed).
 */
function isSamePane(before: ConversationRecord, after: ConversationRecord, imageId: string): boolean {
  return (
    after.prompt === before.prompt &&
    JSON.stringify(after.settings) === JSON.stringify(before.settings) &&
    (after.suggestion === null || after.suggestion.imageId === imageId)
  );
}
