import type { ImageRecord } from '../../server/core/index.ts';

/** An image record as the store keeps it: an 8×8 "a fox" made with seed 5, 20 steps, CFG 7; `over` changes any field. */
export function makeImageRecord(over: Partial<ImageRecord> = {}): ImageRecord {
  return {
    id: 'img',
    conversationId: 'c',
    turnId: null,
    file: 'img.png',
    url: '/images/img.png',
    prompt: 'a fox',
    negativePrompt: '',
    steps: 20,
    cfg: 7,
    seed: 5,
    sampler: null,
    scheduler: null,
    width: 8,
    height: 8,
    model: null,
    promptVersion: null,
    source: null,
    compareSide: null,
    createdAt: '2026-11-26T10:00:00.000Z',
    ...over,
  };
}
