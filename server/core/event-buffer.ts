// A one-reader queue between a task that produces events and the HTTP stream that sends them, so the
// task never waits for the reader: a client that stops reading its socket cannot hold a turn up.

export interface EventBuffer<T> extends AsyncIterable<T> {
  push(item: T): void;
  /** No more items: the reader ends once it has read what is queued. */
  close(): void;
}

/** `onReturn` runs when the reader stops before the end (nobody will read what comes next). */
export function createEventBuffer<T>(onReturn?: () => void): EventBuffer<T> {
  // A head index, not shift(): a reader that stalls can leave tens of thousands of deltas queued.
  let queued: T[] = [];
  let head = 0;
  let closed = false;
  let wake: (() => void) | undefined;
  const notify = () => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };
  async function* read(): AsyncGenerator<T> {
    let ended = false;
    try {
      for (;;) {
        while (head < queued.length) {
          const item = queued[head] as T;
          head++;
          // Stryker disable next-line ConditionalExpression,BlockStatement: memory only: the head index still points past what was read
          if (head === queued.length) {
            queued = [];
            head = 0;
          }
          yield item;
        }
        if (closed) {
          ended = true;
          return;
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      if (!ended) onReturn?.();
    }
  }
  return {
    push(item) {
      if (closed) return;
      queued.push(item);
      notify();
    },
    close() {
      closed = true;
      notify();
    },
    [Symbol.asyncIterator]: () => read(),
  };
}
