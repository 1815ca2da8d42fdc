// The gallery's targets (docs/BENCHMARKS.md): with 5 000 images stored, a page of GET /api/images and a search
// each within 150 ms, each thumbnail of a typical 1024² picture at most 40 kB, and the gallery page usable in
// Chromium within 1 s. The rows are written straight through the store; the PNGs are a few shared files linked
// under each image's own name (four painted 1024² pictures for the newest page, small ones below).
import { copyFileSync, existsSync, linkSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { DEFAULT_SETTINGS, type ImageRecord } from '../../server/core/index.ts';
import { createSqliteStore } from '../../server/sqlite/index.ts';
import { makePng } from '../fakes/png-bytes.ts';
import { paintPicture } from '../helpers/pictures.ts';
import { readRssMb, sleep, startNpmServer } from './processes.ts';
import { median, type Figure } from './stats.ts';

export const GALLERY_IMAGES = 5_000;
const CONVERSATIONS = 50;
/** The newest images (the gallery's first page and more) are painted 1024² pictures; the rest small ones. */
const PAINTED_NEWEST = 120;
const ADJECTIVES = ['red', 'misty', 'golden', 'quiet', 'ancient', 'neon', 'frozen', 'gentle', 'stormy', 'tiny', 'vast', 'sunlit'];
const SUBJECTS = ['fox', 'lighthouse', 'paper boat', 'cathedral', 'owl', 'harbour', 'robot', 'forest', 'tea house', 'dragon', 'bicycle', 'glacier'];
const PLACES = ['in the snow', 'at dusk', 'under the rain', 'on a hill', 'by the sea', 'in a market', 'at night', 'in autumn'];
const STYLES = ['oil painting', 'watercolor', 'photograph, 35mm', 'ink drawing', 'digital art, highly detailed', 'pastel sketch'];
const CHECKPOINTS = ['v1-5-pruned-emaonly', 'sd_xl_base_1.0', 'dreamshaperXL_v21', 'juggernautXL_v9'];

/** The search measured: two words that are in about one prompt in a hundred. */
export const GALLERY_SEARCH = 'misty lighthouse';

interface GalleryBenchOptions {
  ollamaUrl: string;
  dataDir: string;
  quick: boolean;
  log: (line: string) => void;
}

/** Writes the images folder and 5 000 image records (in 50 conversations) straight through the store. */
function buildGallery(dataDir: string): { newest: string[] } {
  const imagesDir = join(dataDir, 'images');
  mkdirSync(imagesDir, { recursive: true });
  const sources = join(dataDir, 'sources');
  mkdirSync(sources);
  const painted = [1, 2, 3, 4].map((seed) => {
    const path = join(sources, `painted-${seed}.png`);
    writeFileSync(path, paintPicture(1024, 1024, seed));
    return path;
  });
  const small = [[200, 120, 40], [40, 120, 200], [90, 160, 90], [180, 180, 180]].map((rgb, index) => {
    const path = join(sources, `small-${index}.png`);
    writeFileSync(path, makePng(256, 256, rgb as [number, number, number]));
    return path;
  });
  const store = createSqliteStore({ path: join(dataDir, 'easel.db') });
  const start = Date.parse('2026-01-01T00:00:00.000Z');
  const conversations = Array.from({ length: CONVERSATIONS }, (_, index) => {
    const id = `00000000-0000-4000-8000-${String(index).padStart(12, '0')}`;
    store.createConversation({ id, createdAt: new Date(start).toISOString(), settings: DEFAULT_SETTINGS, prompt: `conversation ${index}` });
    return id;
  });
  const newest: string[] = [];
  for (let index = 0; index < GALLERY_IMAGES; index++) {
    const id = index.toString(16).padStart(32, '0');
    const file = `${id}.png`;
    const isPainted = index >= GALLERY_IMAGES - PAINTED_NEWEST;
    const source = isPainted ? painted[index % painted.length] : small[index % small.length];
    // Shared bytes, each image under its own name (a hard link where the file system allows one).
    try {
      linkSync(source as string, join(imagesDir, file));
    } catch {
      copyFileSync(source as string, join(imagesDir, file));
    }
    const prompt = `a ${ADJECTIVES[index % ADJECTIVES.length]} ${SUBJECTS[Math.floor(index / 7) % SUBJECTS.length]} ${PLACES[index % PLACES.length]}, ${STYLES[Math.floor(index / 3) % STYLES.length]}, picture ${index}`;
    const image: ImageRecord = {
      id,
      conversationId: conversations[index % CONVERSATIONS] as string,
      turnId: null,
      file,
      url: `/images/${file}`,
      prompt,
      negativePrompt: 'blurry',
      steps: 20,
      cfg: 7,
      seed: 1000 + index,
      sampler: 'Euler a',
      scheduler: 'Automatic',
      width: isPainted ? 1024 : 256,
      height: isPainted ? 1024 : 256,
      model: CHECKPOINTS[index % CHECKPOINTS.length] as string,
      promptVersion: null,
      createdAt: new Date(start + index * 60_000).toISOString(),
    } as ImageRecord;
    store.addImage(image);
    if (isPainted) newest.unshift(id);
  }
  store.close();
  rmSync(sources, { recursive: true, force: true });
  return { newest };
}

async function timeGet(url: string): Promise<{ ms: number; status: number; bytes: Uint8Array; body: unknown }> {
  const started = performance.now();
  const response = await fetch(url);
  const bytes = new Uint8Array(await response.arrayBuffer());
  const ms = performance.now() - started;
  const type = response.headers.get('content-type') ?? '';
  return { ms, status: response.status, bytes, body: type.includes('json') ? JSON.parse(new TextDecoder().decode(bytes)) : undefined };
}

/** Times of `rounds` requests of `path` after two unmeasured ones; each must answer 200. */
async function timeRounds(base: string, path: string, rounds: number, check: (body: unknown) => void): Promise<number[]> {
  for (let warm = 0; warm < 2; warm++) await timeGet(base + path);
  const times: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const answer = await timeGet(base + path);
    if (answer.status !== 200) throw new Error(`GET ${path} answered ${answer.status}`);
    check(answer.body);
    times.push(answer.ms);
  }
  return times;
}

/** Waits until the server has finished the thumbnails a closed page still asked for. */
async function waitForThumbnails(dir: string): Promise<void> {
  let before = -1;
  for (let tries = 0; tries < 50; tries++) {
    const now = existsSync(dir) ? readdirSync(dir).length : 0;
    if (now === before) return;
    before = now;
    await sleep(300);
  }
}

/** Then removes them all: the next visit finds none made. */
async function forgetThumbnails(dir: string): Promise<void> {
  await waitForThumbnails(dir);
  rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
}

function launchChromium(): Promise<Browser> | undefined {
  const path = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((candidate) => existsSync(candidate));
  if (!path || !existsSync(path)) return undefined;
  return chromium.launch({ executablePath: path, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'] });
}

/**
 * From the navigation's start to a usable page, by the page's own clock (so the driver's round trips do not count):
 * its script running (DOMContentLoaded: the large view wired) and every thumbnail in view shown. A click on the
 * first one must then open the large view (checked, not timed).
 */
async function timePageLoad(browser: Browser, url: string): Promise<{ ms: number; phases: string }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(error.message));
  await page.goto(url, { waitUntil: 'domcontentloaded' });
  const usable = await page.waitForFunction(
    () => {
      const images = [...document.querySelectorAll<HTMLImageElement>('#gallery-grid img')];
      const inView = images.filter((img) => img.getBoundingClientRect().top < window.innerHeight);
      const ready = document.readyState !== 'loading' && inView.length > 0 && inView.every((img) => img.complete && img.naturalWidth > 0);
      return ready ? performance.now() : false;
    },
    undefined,
    { polling: 'raf', timeout: 30_000 },
  );
  const ms = (await usable.jsonValue()) as number;
  const timing = await page.evaluate(() => {
    const navigation = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
    const thumbs = performance.getEntriesByType('resource').filter((entry) => entry.name.includes('/images/thumbs/'));
    return { dcl: navigation.domContentLoadedEventEnd, thumbs: thumbs.length };
  });
  await page.locator('#gallery-grid [data-gallery-image]').first().click();
  await page.locator('#gallery-dialog[open]').waitFor();
  await context.close();
  if (problems.length > 0) throw new Error(`the gallery page logged problems: ${problems.join('; ')}`);
  return { ms, phases: `DOMContentLoaded ${timing.dcl.toFixed(0)} ms, every thumbnail in view shown ${ms.toFixed(0)} ms (${timing.thumbs} thumbnails asked for)` };
}

export async function measureGallery(options: GalleryBenchOptions): Promise<Figure[]> {
  const { dataDir, log } = options;
  const rounds = options.quick ? 10 : 30;
  log(`gallery: ${GALLERY_IMAGES} images written through the store…`);
  const built = performance.now();
  const { newest } = buildGallery(dataDir);
  log(`  built in ${((performance.now() - built) / 1000).toFixed(1)} s; starting npm start on it…`);
  const server = await startNpmServer({ ollamaUrl: options.ollamaUrl, dataDir });
  const figures: Figure[] = [];
  try {
    const base = server.url;
    const pageOf = (expected: number) => (body: unknown) => {
      const count = (body as { images?: unknown[] }).images?.length;
      if (count !== expected) throw new Error(`expected ${expected} images, got ${count}`);
    };
    log(`  GET /api/images: ${rounds} rounds each of the first page, a search, a deep page, a conversation, a checkpoint…`);
    const firstPage = await timeRounds(base, '/api/images', rounds, pageOf(60));
    const searched = await timeRounds(base, `/api/images?q=${encodeURIComponent(GALLERY_SEARCH)}`, rounds, (body) => {
      const images = (body as { images: Array<{ prompt: string }> }).images;
      if (images.length === 0 || !images.every((image) => image.prompt.includes(GALLERY_SEARCH.split(' ')[0] as string))) throw new Error('the search found nothing, or the wrong images');
    });
    // The page after 4 800 images: a cursor deep in the order.
    let cursor: string | null = null;
    for (let page = 0; page < 24; page++) {
      const answer: { next: string | null } = (await timeGet(`${base}/api/images?limit=200${cursor ? `&before=${encodeURIComponent(cursor)}` : ''}`)).body as { next: string | null };
      cursor = answer.next;
    }
    const deep = await timeRounds(base, `/api/images?before=${encodeURIComponent(cursor ?? '')}`, rounds, pageOf(60));
    const conversation = await timeRounds(base, '/api/images?conversationId=00000000-0000-4000-8000-000000000007', rounds, pageOf(60));
    const checkpoint = await timeRounds(base, '/api/images?checkpoint=sd_xl_base_1.0&q=fox', rounds, () => {});
    const galleryHtml = await timeRounds(base, '/gallery', rounds, () => {});

    const rssBeforeThumbs = readRssMb(server.pid);
    log('  thumbnails of the four painted 1024² pictures (made at their first request)…');
    const thumbKb: number[] = [];
    const thumbMs: number[] = [];
    for (const id of newest.slice(0, 4)) {
      const answer = await timeGet(`${base}/images/thumbs/${id}.webp`);
      if (answer.status !== 200) throw new Error(`the thumbnail of ${id} answered ${answer.status}`);
      thumbKb.push(answer.bytes.length / 1024);
      thumbMs.push(answer.ms);
    }
    const rssAfterThumbs = readRssMb(server.pid);

    figures.push(
      { name: `GET /api/images, a page of 60 of ${GALLERY_IMAGES} images`, rounds: firstPage, unit: 'ms', target: { kind: 'max', limit: 150 } },
      { name: `GET /api/images?q=${GALLERY_SEARCH.replace(' ', '+')} (every word, any case; ${GALLERY_IMAGES} prompts)`, rounds: searched, unit: 'ms', target: { kind: 'max', limit: 150 } },
      { name: 'GET /api/images, the page after 4 800 (a deep `before`)', rounds: deep, unit: 'ms' },
      { name: 'GET /api/images?conversationId=… (100 of its images)', rounds: conversation, unit: 'ms' },
      { name: 'GET /api/images?checkpoint=…&q=fox', rounds: checkpoint, unit: 'ms' },
      { name: 'GET /gallery, the page\'s HTML (60 pictures, the filters)', rounds: galleryHtml, unit: 'ms' },
      { name: 'thumbnail of a typical 1024² picture (WebP, 384×384)', rounds: thumbKb, unit: 'kB', target: { kind: 'max', limit: 40 } },
      { name: 'making a thumbnail of a 1024² picture, request to answer', rounds: thumbMs, unit: 'ms' },
      { name: 'RSS of the server process after these requests, before any thumbnail', rounds: [rssBeforeThumbs], unit: 'MB' },
      { name: 'RSS of the server process after its first thumbnails (sharp and libvips loaded)', rounds: [rssAfterThumbs], unit: 'MB' },
    );

    const launched = launchChromium();
    if (!launched) {
      log('  no Chromium (set CHROMIUM_PATH or `apt-get install chromium`): the page\'s time is not measured.');
      return figures;
    }
    const browser = await launched;
    try {
      const pageRounds = options.quick ? 3 : 5;
      log(`  Chromium: ${pageRounds} first visits (every thumbnail in view made on request), then ${pageRounds} with them kept…`);
      await timePageLoad(browser, `${base}/gallery`);
      const cold: number[] = [];
      for (let round = 0; round < pageRounds; round++) {
        await forgetThumbnails(join(dataDir, 'thumbs'));
        const run = await timePageLoad(browser, `${base}/gallery`);
        log(`    first visit: ${run.phases}`);
        cold.push(run.ms);
      }
      await forgetThumbnails(join(dataDir, 'thumbs'));
      // Every thumbnail of the first page made, as they are for images made since thumbnails exist.
      await timePageLoad(browser, `${base}/gallery`);
      await waitForThumbnails(join(dataDir, 'thumbs'));
      const warm: number[] = [];
      for (let round = 0; round < pageRounds; round++) {
        const run = await timePageLoad(browser, `${base}/gallery`);
        log(`    thumbnails kept: ${run.phases}`);
        warm.push(run.ms);
      }
      log(`    median: first visits ${median(cold).toFixed(0)} ms, thumbnails kept ${median(warm).toFixed(0)} ms`);
      figures.push(
        { name: 'gallery page usable in Chromium (its script running, every thumbnail in view shown), thumbnails made', rounds: warm, unit: 'ms', target: { kind: 'max', limit: 1000 } },
        { name: 'the same on a first visit after an upgrade: every thumbnail in view made then (1024² pictures)', rounds: cold, unit: 'ms' },
      );
    } finally {
      await browser.close();
    }
    return figures;
  } catch (error) {
    log(`server stderr:\n${server.stderrTail()}`);
    throw error;
  } finally {
    await server.stop();
  }
}
