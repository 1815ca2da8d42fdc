// The page's token counter runs the server's own estimate: /assets/token-estimate.js is made from
// estimateEncoderTokens itself (server/http/page/assets.ts), so the counter and the report card count alike.
import { describe, expect, it } from 'vitest';
import { estimateEncoderTokens } from '../../../server/protocol/index.ts';
import { loadAssets, renderTokenEstimateModule } from '../../../server/http/page/assets.ts';

const PROMPTS = [
  '',
  'a red fox',
  'masterpiece, best quality, 1girl, (blue wizard hat:1.3), extraordinarilylongwordhere, 42 candles',
  'A photograph of an old lighthouse on a cliff at dusk, waves breaking below, warm light in its window.',
  'ünïcödé — 東京の夜景, neon; rain!!',
];

describe('the token estimate module the page loads', () => {
  it('counts as the server does, for CLIP and T5', async () => {
    const served = loadAssets().get('token-estimate.js');
    expect(served?.contentType).toBe('text/javascript; charset=utf-8');
    const text = new TextDecoder().decode(served?.body);
    expect(text).toBe(renderTokenEstimateModule());
    const module = (await import(`data:text/javascript;base64,${Buffer.from(text).toString('base64')}`)) as { estimateEncoderTokens: typeof estimateEncoderTokens };
    for (const prompt of PROMPTS) {
      for (const encoder of ['clip', 't5'] as const) {
        expect(module.estimateEncoderTokens(prompt, encoder), `${encoder}: ${prompt}`).toBe(estimateEncoderTokens(prompt, encoder));
      }
    }
    // Not a constant: the two encoders differ where a real prompt makes them differ.
    expect(module.estimateEncoderTokens(PROMPTS[3]!, 'clip')).not.toBe(module.estimateEncoderTokens(PROMPTS[3]!, 't5'));
  });
});
