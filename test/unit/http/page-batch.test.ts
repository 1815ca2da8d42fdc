// A batch on the page: its first image opens one entry in the chat and the others join it, its bar ends with the
// last image, a reply's batch fills the reply's thumbnails; after a reload the images sharing their moment are
// one entry again.
import { describe, expect, it } from 'vitest';
import type { ImageEvent } from '../../../server/core/index.ts';
import { renderEventHtml } from '../../../server/http/page/render-event.ts';
import { renderTranscript } from '../../../server/http/page/views.ts';
import { partials, read, targets } from '../../helpers/html.ts';
import { makeImageRecord } from '../../helpers/records.ts';

const image = (index: number, count: number): ImageEvent => ({
  type: 'image',
  id: index === 0 ? 'g1' : `g1x${index}`,
  url: `/images/${index}.png`,
  width: 8,
  height: 8,
  prompt: 'a fox',
  seed: 10 + index,
  batch: { index, count },
});

describe('a batch on the page', () => {
  it("Generate's stream: the first image opens the entry, the others join its thumbnails, the bar ends with the last", () => {
    const view = { conversationId: 'c1', imageStarted: true, generationId: 'g1' };
    expect(targets(renderEventHtml(image(0, 3), view))).toEqual(['#image-frame innerHTML', '#image-announce textContent', '#log-empty delete', '#log beforeend']);
    expect(read(renderEventHtml(image(0, 3), view)).querySelector('article.generated')?.id).toBe('batch-g1');
    expect(targets(renderEventHtml(image(1, 3), view))).toEqual(['#image-frame innerHTML', '#image-announce textContent', '#batch-g1-thumbs beforeend']);
    expect(targets(renderEventHtml(image(2, 3), view))).toEqual(['#image-frame innerHTML', '#generation-g1 delete', '#image-announce textContent', '#batch-g1-thumbs beforeend']);
    expect(partials(renderEventHtml(image(2, 3), view)).find((partial) => partial.target === '#image-announce')?.text).toBe('Image 3 of 3 is ready.');
  });

  it("a reply's batch goes into the reply's thumbnails", () => {
    const view = { conversationId: 'c1', imageStarted: true, generationId: 'g1', bubbleId: 'turn-4', replied: true };
    expect(targets(renderEventHtml(image(1, 2), view))).toEqual(['#image-frame innerHTML', '#generation-g1 delete', '#image-announce textContent', '#turn-4-images beforeend']);
  });

  it('after a reload, Generate images sharing their moment are one entry; others stay apart', () => {
    const at = '2026-11-26T10:00:00.000Z';
    const images = [
      makeImageRecord({ id: 'a', url: '/images/a.png', createdAt: at }),
      makeImageRecord({ id: 'b', url: '/images/b.png', createdAt: at }),
      makeImageRecord({ id: 'c', url: '/images/c.png', createdAt: '2026-11-26T10:05:00.000Z' }),
    ];
    const root = read(renderTranscript('c1', [], images, false));
    const entries = root.querySelectorAll('article.generated');
    expect(entries.map((entry) => [entry.id, entry.querySelectorAll('button.thumb').length])).toEqual([
      ['batch-a', 2],
      ['', 1],
    ]);
  });
});
