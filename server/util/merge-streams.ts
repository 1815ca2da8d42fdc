/**
 * The items of several async iterables as they come, in one: a page's one live connection carries its
 * conversation's events and the library's (a browser holds only six connections to one host). Ends when all
 * end; returning early returns every source.
 */
export async function* mergeStreams<T>(sources: ReadonlyArray<AsyncIterable<T>>): AsyncGenerator<T> {
  const iterators = sources.map((source) => source[Symbol.asyncIterator]());
  const pending = new Map<number, Promise<{ index: number; step: IteratorResult<T> }>>();
  const pull = (index: number) => {
    const iterator = iterators[index] as AsyncIterator<T>;
    pending.set(index, iterator.next().then((step) => ({ index, step })));
  };
  iterators.forEach((_, index) => pull(index));
  try {
    while (pending.size > 0) {
      const { index, step } = await Promise.race(pending.values());
      if (step.done) {
        pending.delete(index);
        continue;
      }
      pull(index);
      yield step.value;
    }
  } finally {
    await Promise.all(iterators.map((iterator) => iterator.return?.()));
  }
}
