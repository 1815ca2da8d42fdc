// Vary on the page's markup: each thumbnail's two buttons submit the prompt pane's Generate form with
// `from=<imageId>:<strength>`, the Generate button says whether the server can vary (vary.js reads it), and the
// Vary buttons' description is what they do or the server's own reason.
import { describe, expect, it } from 'vitest';
import { renderThumbnail, renderVaryButtons } from '../../../server/http/page/bubbles.ts';
import { describeVary, renderGenerateButton, renderVaryHelp } from '../../../server/http/page/views.ts';
import { find, read, texts } from '../../helpers/html.ts';
import { makeImageRecord } from '../../helpers/records.ts';

describe('Vary on the page', () => {
  it("a thumbnail offers Vary (subtle) and Vary (strong), each submitting #generate-form with the image's id and strength", () => {
    const root = read(renderThumbnail(makeImageRecord({ id: 'a'.repeat(32), url: '/images/one.png' })));
    expect(texts(root, 'button.vary')).toEqual(['Vary (subtle)', 'Vary (strong)']);
    expect(root.querySelectorAll('button.vary').map((button) => button.attributes)).toEqual([
      { type: 'submit', form: 'generate-form', name: 'from', value: `${'a'.repeat(32)}:0.35`, class: 'vary quiet', 'aria-describedby': 'vary-help' },
      { type: 'submit', form: 'generate-form', name: 'from', value: `${'a'.repeat(32)}:0.65`, class: 'vary quiet', 'aria-describedby': 'vary-help' },
    ]);
    // The large view learns the id from the thumbnail.
    expect(find(root, 'button.thumb').getAttribute('data-image-id')).toBe('a'.repeat(32));
  });

  it('an image without a usable id has none', () => {
    expect(String(renderVaryButtons({ url: '/images/x.png', prompt: 'p', width: 8, height: 8 }))).toBe('');
    expect(String(renderVaryButtons({ id: 'a"><script>', url: '/images/x.png', prompt: 'p', width: 8, height: 8 }))).toBe('');
  });

  it("the Generate button says whether the server can vary, and the help says why not in the server's words", () => {
    const vary = (ready: boolean, canVary?: true | string) => find(read(renderGenerateButton(ready, false, canVary)), '#generate').getAttribute('data-vary');
    expect([vary(true, true), vary(true), vary(true, 'LocalAI cannot.'), vary(false, true)]).toEqual(['yes', 'yes', 'no', 'no']);
    expect(find(read(renderVaryHelp({ configured: true, detail: '', canVary: 'LocalAI cannot.' })), '#vary-help').text).toBe('LocalAI cannot.');
    expect(describeVary({ configured: true, detail: '', canVary: true })).toEqual({
      ready: true,
      text: 'Vary makes a new image from the prompt and settings shown, starting from this one: subtle keeps most of it, strong changes more.',
    });
    expect(describeVary({ configured: false, detail: '' })).toEqual({ ready: false, text: 'Vary needs an image server, as Generate does.' });
  });
});
