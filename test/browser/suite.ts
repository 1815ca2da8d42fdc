// What every browser test file shares: skip (outside CI) or fail (in CI) without Chromium, and polling.
import { describe, expect } from 'vitest';
import { findChromium } from './browser.ts';

const chromiumPath = findChromium();
if (!chromiumPath) {
  const reason = 'No Chromium found (set CHROMIUM_PATH or run `apt-get install chromium`).';
  // In CI a missing browser must fail the run, not quietly skip the page's only tests.
  if (process.env.CI) throw new Error(`${reason} The browser tests cannot run in CI without it.`);
  console.warn(`Skipping the browser tests: ${reason}`);
}

/** `describe` when Chromium is available, `describe.skip` otherwise (outside CI). */
export const describeInBrowser = chromiumPath ? describe : describe.skip;

/** Retries a read until the matcher passes (the page updates asynchronously); 10 s before failing. */
export function poll<T>(read: () => Promise<T> | T) {
  return expect.poll(read, { timeout: 10_000, interval: 20 });
}
