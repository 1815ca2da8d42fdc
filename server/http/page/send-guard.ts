// Each send from the page carries a fresh random key. Remembering the keys already seen makes the
// stream endpoints one-shot: a repeated or replayed request can never run a reply twice.

const SEND_KEY = /^[A-Za-z0-9_-]{16,64}$/;

export interface SendGuard {
  /** True the first time a key is seen, false for a repeat. */
  claim(key: string): boolean;
}

export function isSendKey(value: unknown): value is string {
  return typeof value === 'string' && SEND_KEY.test(value);
}

/** Keeps the newest `capacity` keys; an evicted key is far older than any request still in flight. */
export function createSendGuard(capacity = 10_000): SendGuard {
  const seen = new Set<string>();
  return {
    claim(key) {
      if (seen.has(key)) return false;
      seen.add(key);
      if (seen.size > capacity) {
        const oldest = seen.values().next();
        if (!oldest.done) seen.delete(oldest.value);
      }
      return true;
    },
  };
}
