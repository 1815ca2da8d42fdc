// Shared set-up for the browser suites: Debian's Chromium driven by playwright-core against the
// real server (startServer on port 0, temp data dir) and the fake Ollama.
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { startEaselStage, type EaselStage, type EaselStageOptions } from '../helpers/easel.ts';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser'];

/** CHROMIUM_PATH wins; else Debian's package. Undefined when there is none. */
export function findChromium(env: Record<string, string | undefined> = process.env): string | undefined {
  if (env.CHROMIUM_PATH) return existsSync(env.CHROMIUM_PATH) ? env.CHROMIUM_PATH : undefined;
  return CANDIDATES.find((path) => existsSync(path));
}

export async function launchChromium(): Promise<Browser> {
  const chromiumPath = findChromium();
  if (!chromiumPath) throw new Error('No Chromium to launch: set CHROMIUM_PATH or run `apt-get install chromium`.');
  // launch() gives every run a fresh temporary user-data dir and removes it on close.
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
}

/** Chromium and the real server with its fakes (startEaselStage). */
export interface Stage extends EaselStage {
  browser: Browser;
  /** Closes Chromium, then Easel and the fakes. */
  close(): Promise<void>;
}

/** Chromium, the fake Ollama (a fake AUTOMATIC1111 too with `a1111`) and the real server; `flags` are extra flags for Easel. */
export async function startStage(options: EaselStageOptions = {}): Promise<Stage> {
  const browser = await launchChromium();
  const served = await startEaselStage(options);
  return {
    ...served,
    browser,
    async close() {
      await browser.close();
      await served.close();
    },
  };
}

export interface OpenPage {
  context: BrowserContext;
  page: Page;
  /** Console errors, page errors and CSP violations since the last navigation: a clean page has none. */
  problems: string[];
  /** Requests the page made since the last navigation, as "METHOD path". */
  requests: string[];
  close(): Promise<void>;
}

/** One browser page per test file (a new page costs more than a navigation). */
export async function openPage(stage: Stage): Promise<OpenPage> {
  const context = await stage.browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const open: OpenPage = { context, page, problems: [], requests: [], close: () => context.close() };
  page.on('console', (message) => {
    if (message.type() !== 'error' && message.type() !== 'warning') return;
    // Chrome logs every 4xx; a refused setting (422) or a busy conversation (409) is an expected answer.
    if (/Failed to load resource: the server responded with a status of (409|422)\b/.test(message.text())) return;
    open.problems.push(`console.${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => open.problems.push(`pageerror: ${error.message}`));
  page.on('request', (request) => open.requests.push(`${request.method()} ${new URL(request.url()).pathname}`));
  return open;
}

/** Navigates the page to a new, empty conversation and starts recording afresh. */
export async function openNewConversation(stage: Stage, open: OpenPage): Promise<string> {
  const id = await stage.easel.newConversation();
  open.problems.length = 0;
  open.requests.length = 0;
  const response = await open.page.goto(`${stage.easel.url}/c/${encodeURIComponent(id)}`);
  if (!response?.ok()) throw new Error(`the page did not load: ${response?.status()}`);
  // htmx has processed the page once the status line was fetched.
  await open.page.locator('#status .state').first().waitFor();
  return id;
}

/** The page's conversation id, from its URL. */
export function conversationIdOf(page: Page): string {
  const match = /\/c\/([^/?#]+)/.exec(page.url());
  if (!match?.[1]) throw new Error(`not on a conversation page: ${page.url()}`);
  return decodeURIComponent(match[1]);
}


/** What recordStates watches and reads. */
export interface Watch {
  /** The element whose changes are observed (the first one matching). */
  root: string;
  observe: MutationObserverInit;
  /** What is read after each change: the first element matching `first`, or the last matching `last`. */
  element: { first: string } | { last: string };
  /** Its text by default; else this attribute, `orElse` when the element has none. */
  attribute?: { name: string; orElse: string };
  /** Recorded when there is no such element; by default nothing is. */
  whenAbsent?: string;
}

/**
 * Records a reading of an element after every DOM change below `watch.root`, to see every state the page went
 * through (a streaming reply's text, a progressbar's value). Gives a function that returns the readings so far.
 */
export async function recordStates(page: Page, watch: Watch): Promise<() => Promise<string[]>> {
  const index = await page.evaluate((w) => {
    const recorders = ((window as unknown as { __recorded?: string[][] }).__recorded ??= []);
    const seen: string[] = [];
    recorders.push(seen);
    new MutationObserver(() => {
      const found = 'first' in w.element ? document.querySelector(w.element.first) : [...document.querySelectorAll(w.element.last)].at(-1);
      if (!found) {
        if (w.whenAbsent !== undefined) seen.push(w.whenAbsent);
        return;
      }
      seen.push(w.attribute ? (found.getAttribute(w.attribute.name) ?? w.attribute.orElse) : (found.textContent ?? ''));
    }).observe(document.querySelector(w.root)!, w.observe);
    return recorders.length - 1;
  }, watch);
  return () => page.evaluate((i) => (window as unknown as { __recorded: string[][] }).__recorded[i]!, index);
}
