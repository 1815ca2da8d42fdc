// Saves the text of a reply while it streams, so a crash loses at most the last second of it: at most
// once per interval, and once more after the last change (a trailing save) when the text then rests.

export interface ReplySaver {
  /** The text shown so far; saved now, or at the end of the current interval. */
  update(text: string): void;
  /** Cancels a pending save (the turn's final write follows). */
  stop(): void;
}

export function createReplySaver(options: {
  save: (text: string) => void;
  onError: (error: unknown) => void;
  intervalMs?: number;
  now?: () => number;
}): ReplySaver {
  const intervalMs = options.intervalMs ?? 1000;
  const now = options.now ?? Date.now;
  let lastSaveAt = Number.NEGATIVE_INFINITY;
  let latest: string | undefined;
  let saved: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const flush = () => {
    timer = undefined;
    if (stopped || latest === undefined || latest === saved) return;
    lastSaveAt = now();
    saved = latest;
    try {
      options.save(latest);
    } catch (error) {
      options.onError(error);
    }
  };

  return {
    update(text) {
      // Stryker disable next-line ConditionalExpression: flush refuses a save after stop()
      if (stopped) return;
      latest = text;
      // Stryker disable next-line ConditionalExpression: a second timer finds the text already saved
      if (timer) return;
      const wait = lastSaveAt + intervalMs - now();
      if (wait <= 0) flush();
      else timer = setTimeout(flush, wait);
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
