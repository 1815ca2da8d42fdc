// Saves docs/screenshot.png: the page mid-conversation, the prompt pane filled and a reply streaming.
// Run with: npx tsx test/browser/screenshot.ts
import { fileURLToPath } from 'node:url';
import { scriptReply } from '../fakes/fake-ollama.ts';
import { openNewConversation, openPage, startStage } from './browser.ts';

const OUTPUT = fileURLToPath(new URL('../../docs/screenshot.png', import.meta.url));

async function saveScreenshot(): Promise<void> {
  const stage = await startStage();
  try {
    const open = await openPage(stage);
    const { page } = open;
    await openNewConversation(stage, open);

    stage.fake.enqueue(
      scriptReply(
        'Lovely idea. I picture a deep armchair by a tall window with rain running down the glass, a stack of books, ' +
          'a knitted blanket and the warm glow of a lamp against the grey afternoon outside.\n\nShould the room feel modern or old-fashioned?',
        {
          prompt:
            'cozy reading nook, deep armchair by a tall rain-streaked window, stack of books, knitted blanket, warm lamp glow, grey afternoon light, soft focus, highly detailed',
          generate_image: false,
          steps: 28,
          cfg: 6.5,
          seed: -1,
          negative_prompt: 'blurry, people',
        },
      ),
    );
    const message = page.getByRole('textbox', { name: 'Message' });
    await message.fill('A cozy reading nook by a rainy window. Something warm.');
    await message.press('Enter');
    await page.locator('#log .typing').waitFor({ state: 'detached' });

    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    stage.fake.enqueue({
      chunks: [
        'Old-fashioned it is: a wingback chair in faded green velvet, wooden shelves full of worn books, and a ginger cat ',
        'curled up asleep on the blanket. ',
        'I will keep the rain on the glass.\n---\n{"prompt": "x", "generate_image": false, "steps": 28, "cfg": 6.5, "seed": -1}',
      ],
      gate,
    });
    await message.fill('Old-fashioned, with a cat asleep on the blanket.');
    await message.press('Enter');
    await page.locator('#log .msg.assistant .text').last().getByText('ginger cat').waitFor();
    await page.locator('#status .state').first().waitFor();
    await page.screenshot({ path: OUTPUT });
    release();
    await page.locator('#log .typing').waitFor({ state: 'detached' });
    await open.close();
    console.log(`Saved ${OUTPUT}`);
  } finally {
    await stage.close();
  }
}

await saveScreenshot();
