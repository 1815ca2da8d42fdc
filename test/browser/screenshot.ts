// Saves docs/screenshot.png: the page mid-conversation, with a generated image in the image area and as a
// thumbnail in the chat with the vision model's check under it, the prompt pane filled and the next reply streaming.
// Run with: npx tsx test/browser/screenshot.ts
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { encodeRgbPng } from '../fakes/png-bytes.ts';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { openPage, startStage } from './browser.ts';

const OUTPUT = fileURLToPath(new URL('../../docs/screenshot.png', import.meta.url));


/** A small painted scene (rainy window, warm lamp glow) so the screenshot shows a picture, not a flat square. */
function paintScene(size: number): Uint8Array {
  const mix = (a: number, b: number, t: number) => a + (b - a) * Math.min(1, Math.max(0, t));
  return encodeRgbPng(size, size, (x, y) => {
    const u = x / size;
    const v = y / size;
    // The room: warm brown, darker towards the floor.
    let r = mix(92, 48, v);
    let g = mix(64, 32, v);
    let b = mix(46, 26, v);
    // The window: a grey-blue sky with rain streaks, inside a wooden frame.
    const inWindow = u > 0.08 && u < 0.52 && v > 0.1 && v < 0.62;
    if (inWindow) {
      const streak = Math.sin(u * 180 + Math.sin(v * 9) * 2) > 0.93 ? 22 : 0;
      r = mix(150, 96, v / 0.62) + streak;
      g = mix(166, 110, v / 0.62) + streak;
      b = mix(184, 132, v / 0.62) + streak;
      if (Math.abs(u - 0.3) < 0.008 || Math.abs(v - 0.36) < 0.008) [r, g, b] = [70, 48, 34];
    }
    // The lamp: a warm glow on the right.
    const glow = Math.max(0, 1 - Math.hypot(u - 0.78, v - 0.3) / 0.42);
    r = mix(r, 255, glow * 0.75);
    g = mix(g, 196, glow * 0.7);
    b = mix(b, 120, glow * 0.55);
    // The armchair: a deep green shape below the lamp.
    const chair = u > 0.56 && u < 0.94 && v > 0.55 && v < 0.9 && Math.hypot((u - 0.75) / 0.19, (v - 0.6) / 0.35) < 1.15;
    if (chair) [r, g, b] = [mix(64, 38, v), mix(92, 60, v), mix(70, 44, v)];
    return [r, g, b];
  });
}

/** Just enough of AUTOMATIC1111's API for one picture (no progress endpoint, like sd-server). */
async function startPainter(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    void (async () => {
      let body = '';
      for await (const part of request) body += String(part);
      const json = (status: number, value: unknown) => response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
      if (request.url === '/sdapi/v1/options') return json(200, { sd_model_checkpoint: 'dreamshaper_8.safetensors' });
      if (request.url === '/sdapi/v1/txt2img' && request.method === 'POST') {
        const { seed, width } = JSON.parse(body) as { seed: number; width: number };
        const png = Buffer.from(paintScene(width)).toString('base64');
        return json(200, { images: [png], info: JSON.stringify({ seed, sd_model_name: 'dreamshaper_8' }) });
      }
      return json(404, { detail: 'Not Found' });
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function saveScreenshot(): Promise<void> {
  const painter = await startPainter();
  const stage = await startStage({
    flags: ['--image-backend', 'a1111', '--image-url', painter.url, '--vision-model', 'gemma3:4b'],
    ollama: { models: ['mistral:7b', { name: 'gemma3:4b', capabilities: ['completion', 'vision'] }] },
  });
  try {
    const open = await openPage(stage);
    const { page } = open;
    // A few earlier conversations for the library beside the chat.
    for (const [text, reply] of [
      ['A lighthouse on a cliff in a storm', 'Day or night, and how wild should the sea be?'],
      ['A fox in the snow at dusk', 'Here is a first version. Closer, or the whole landscape?'],
    ]) {
      const id = ((await (await stage.easel.post('/api/conversations', {})).json()) as { id: string }).id;
      stage.fake.enqueue(scriptReply(reply!, { prompt: '', generate_image: false, steps: 20, cfg: 7, seed: -1 }));
      await (await stage.easel.post(`/api/conversations/${id}/messages`, { text })).text();
    }
    await page.goto(`${stage.easel.url}/`);
    await page.locator('#status .state').first().waitFor();

    stage.fake.enqueue(
      scriptReply(
        'Lovely idea. I picture a deep armchair by a tall window with rain running down the glass, ' +
          'and the warm glow of a lamp against the grey afternoon outside. Here is a first version.\n\nShould the room feel modern or old-fashioned?',
        {
          prompt:
            'cozy reading nook, deep green armchair by a tall rain-streaked window, warm lamp glow, grey afternoon light, soft focus, highly detailed',
          generate_image: true,
          steps: 28,
          cfg: 6.5,
          seed: 2024,
          negative_prompt: 'blurry, people',
        },
      ),
    );
    const message = page.getByRole('textbox', { name: 'Message' });
    await message.fill('A cozy reading nook by a rainy window. Something warm.');
    await message.press('Enter');
    await page.locator('#log .msg.assistant .thumbs img').waitFor();
    await page.locator('#image-frame img.current-image').waitFor();
    await page.locator('#log .typing').waitFor({ state: 'detached' });

    // The vision model checks the picture: what it shows, what it misses, and its corrected prompt beside the pane.
    stage.fake.enqueue(
      JSON.stringify({
        matches: ['deep green armchair', 'rain-streaked window', 'warm lamp glow'],
        misses: [{ element: 'a book on the armrest', evidence: 'no book is in the picture; the armrest is bare' }],
        revisedPrompt: 'cozy reading nook, deep green armchair with an open book on the armrest, tall rain-streaked window, warm lamp glow, grey afternoon light',
      }),
    );
    await page.locator('#log .thumb-item').getByRole('button', { name: 'Check', exact: true }).click();
    await page.locator('#log .critique h3').waitFor();

    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    stage.fake.enqueue({
      chunks: [
        'Old-fashioned it is: a wingback chair in faded green velvet, wooden shelves full of worn books, and a ginger cat ',
        'curled up asleep on the blanket. ',
        'I will keep the rain on the glass.\n---\n{"prompt": "x", "generate_image": false, "steps": 28, "cfg": 6.5, "seed": 2024}',
      ],
      gate,
    });
    await message.fill('Old-fashioned, with a cat asleep on the blanket.');
    await message.press('Enter');
    await page.locator('#log .msg.assistant .text').last().getByText('ginger cat').waitFor();
    await page.locator('#status .state').first().waitFor();
    await page.evaluate(() => document.fonts.ready.then(() => undefined));
    await page.screenshot({ path: OUTPUT });
    release();
    await page.locator('#log .typing').waitFor({ state: 'detached' });
    await open.close();
    console.log(`Saved ${OUTPUT}`);
  } finally {
    await stage.close();
    await painter.close();
  }
}

await saveScreenshot();
