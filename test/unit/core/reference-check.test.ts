// Which stored images count as reference images (isReferenceImage), seen where it matters: Check refuses a reference
// (it was made from no prompt), and checks any other image. A reference lacks everything a made image has: a
// prompt, steps, a seed, a model, a source, a turn; an image that has any one of them is a made one.
import { onTestFinished, describe, expect, it } from 'vitest';
import type { ImageRecord } from '../../../server/core/index.ts';
import { makeImageRecord } from '../../helpers/records.ts';
import { buildService, newConversationId } from '../../helpers/service.ts';

const REFERENCE = { prompt: '', steps: null, cfg: null, seed: null, sampler: null, model: null, source: null, turnId: null } as const;

/**
 * What Check answers for an image like `over` (`inTurn`: made by a reply of the conversation): the refusal's code,
 * or `checked`. No vision model is set, so a made image gets as far as `unavailable`.
 */
async function checkAnswer(over: Partial<ImageRecord>, { inTurn = false } = {}): Promise<{ code: string; message: string }> {
  const { service, store, realStore } = buildService();
  onTestFinished(() => realStore.close());
  const id = newConversationId(service);
  const turn = inTurn ? { turnId: store.beginTurn(id, { user: { text: 'a red fox' }, replaces: [], context: { kind: 'edit', dropFront: 0, dropBack: 0, append: [{ kind: 'user', text: 'a red fox' }] } }, new Date().toISOString()).turnId } : {};
  store.addImage(makeImageRecord({ id: 'a'.repeat(32), conversationId: id, file: `${'a'.repeat(32)}.png`, url: `/images/${'a'.repeat(32)}.png`, ...REFERENCE, ...over, ...turn }));
  const checked = await service.checkImage(id, 'a'.repeat(32), { signal: new AbortController().signal });
  return checked.ok ? { code: 'checked', message: '' } : { code: checked.error.code, message: checked.error.message };
}

describe('Check tells a reference image from a made one', () => {
  it('refuses a reference image: there is no prompt to check it against', async () => {
    const answer = await checkAnswer({});
    expect(answer.code).toBe('invalid');
    expect(answer.message).toContain('A reference image was not made from a prompt');
  });

  // Each differs from a reference in one field only: that field alone makes it a made image.
  it.each<[string, Partial<ImageRecord>]>([
    ['a prompt', { prompt: 'a red fox' }],
    ['steps', { steps: 20 }],
    ['a seed', { seed: 5 }],
    ['a model', { model: 'sd_xl_base_1.0' }],
    ['a source', { source: { imageId: 'b'.repeat(32), strength: 0.35 } }],
  ])('checks an image that has %s (it goes on to look for a vision model)', async (_name, over) => {
    const answer = await checkAnswer(over);
    expect(answer.message).not.toContain('reference image');
    expect(answer.code).toBe('unavailable');
  });

  it('checks an image that a reply made (it has a turn)', async () => {
    const answer = await checkAnswer({}, { inTurn: true });
    expect(answer.message).not.toContain('reference image');
    expect(answer.code).toBe('unavailable');
  });
});
