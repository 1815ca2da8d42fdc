// What every browser test file shares: skip (outside CI) or fail (in CI) without Chromium, the stage
// (Chromium, the fakes, Easel and one page), and polling.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect } from 'vitest';
import type { FakeA1111 } from '../fakes/fake-a1111.ts';
import type { EaselStageOptions } from '../helpers/easel.ts';
import { late } from '../helpers/late.ts';
import { findChromium, openNewConversation, openPage, startStage, type OpenPage, type Stage } from './browser.ts';

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

/**
 * The browser suite's stage: Chromium, the fake Ollama (and a fake AUTOMATIC1111 with `a1111`, Easel's image
 * backend then), the real server with `flags` and `timing`, and one page, started once before the tests of the
 * describe block that calls this and closed after them. With `newConversation`, the page opens a new, empty
 * conversation before each test (openNewConversation). The names it returns stand for the running stage, its page
 * and its fake AUTOMATIC1111 inside tests and hooks (see late.ts). What a clean test leaves is each suite's own
 * afterEach.
 */
export function useBrowserStage(options: EaselStageOptions & { newConversation?: boolean } = {}): {
  stage: Stage;
  open: OpenPage;
  page: Page;
  a1111: FakeA1111;
} {
  const { newConversation, ...stageOptions } = options;
  let stage: Stage | undefined;
  let open: OpenPage | undefined;
  beforeAll(async () => {
    stage = await startStage(stageOptions);
    open = await openPage(stage);
  });
  afterAll(async () => {
    await stage?.close();
  });
  const started = {
    stage: late('the browser stage', () => stage),
    open: late('the page', () => open),
    page: late('the page', () => open?.page),
    a1111: late('the fake AUTOMATIC1111 (useBrowserStage starts one with `a1111` options)', () => stage?.a1111),
  };
  if (newConversation) {
    beforeEach(async () => {
      await openNewConversation(started.stage, started.open);
    });
  }
  return started;
}
