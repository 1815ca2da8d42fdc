/** Reads an async iterable to its end (Array.fromAsync arrives with Node 22; Easel runs on 20.19). */
export async function collectAll<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

/** A file-system error as Node raises it: `code` set (ENOSPC, EACCES…), or none at all. */
export function makeErrnoError(code?: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code ?? 'no code'}: simulated`), code === undefined ? {} : { code });
}
