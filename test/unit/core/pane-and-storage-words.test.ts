// Core rules of the pane and the store's words: unpinning a setting keeps its value when no suggestion waits,
// a new family moves only a size of the old family's own, a taken suggestion's source, and a failed write names
// what was not saved, for every action.
import { describe, expect, it } from 'vitest';
import { applyUserSettings, describeStorageFailure } from '../../../server/core/index.ts';
import { sourceOfSuggestion } from '../../../server/core/pane.ts';
import { StorageError } from '../../../server/core/errors.ts';
import { DEFAULT_SETTINGS } from '../../../server/core/settings.ts';

describe('applyUserSettings', () => {
  it('unpinning keeps the value when the model suggests nothing, and takes the suggestion when one waits', () => {
    const settings = { ...DEFAULT_SETTINGS, steps: 30, cfg: 6, seed: 42, width: 512, height: 768, negativePrompt: '', autoGenerate: true };

    const change = applyUserSettings({ settings, pinned: ['steps', 'cfg'], settingSuggestions: { cfg: 9 } }, {}, ['steps', 'cfg']);

    // toStrictEqual: a setting holding undefined is a lost value, not the same object.
    expect(change.settings).toStrictEqual({ ...settings, cfg: 9 });
    expect(change.pinned).toEqual([]);
    expect(change.settingSuggestions).toEqual({});
  });
});

describe('a new family in applyUserSettings', () => {
  // SD 1.5 (the default) to SDXL, named by the user: its own size for a size of SD 1.5's, never for one typed.
  const sdxl = { family: 'sdxl' } as const;

  it("moves a size that is one of the old family's own to the new family's nearest, whole", () => {
    const portrait = { ...DEFAULT_SETTINGS, width: 512, height: 768 };
    expect(applyUserSettings({ settings: portrait, pinned: [], settingSuggestions: {} }, sdxl).settings).toMatchObject({ width: 832, height: 1216 });
  });

  it("keeps a size that only shares a side with one of the old family's, and a size this very change sets", () => {
    for (const size of [{ width: 512, height: 640 }, { width: 640, height: 512 }]) {
      const typed = { ...DEFAULT_SETTINGS, ...size };
      expect(applyUserSettings({ settings: typed, pinned: [], settingSuggestions: {} }, sdxl).settings).toMatchObject(size);
    }
    for (const patch of [{ ...sdxl, width: 512 }, { ...sdxl, height: 512 }]) {
      expect(applyUserSettings({ settings: DEFAULT_SETTINGS, pinned: [], settingSuggestions: {} }, patch).settings).toMatchObject({ width: 512, height: 512 });
    }
  });
});

describe('sourceOfSuggestion', () => {
  it("a reply's suggestion, taken, is a suggestion; the vision model's, from a picture it checked, is vision's", () => {
    expect(sourceOfSuggestion({ prompt: 'a fox', turnId: 3 })).toBe('suggestion');
    expect(sourceOfSuggestion({ prompt: 'a fox', turnId: null, imageId: 'i1' })).toBe('vision');
  });
});

describe('describeStorageFailure', () => {
  it('names what could not be saved, for each action', () => {
    const full = new StorageError('full', 'SQLITE_FULL', { location: '/data/easel.db' });
    const words = (['message', 'reply', 'change', 'import', 'delete'] as const).map((action) => describeStorageFailure(full, action).message);

    expect(words).toEqual([
      'Easel could not save your message: the disk holding /data/easel.db is full. Nothing was saved, and your message is back in the box: free some disk space, then send it again.',
      'Easel could not save the reply: the disk holding /data/easel.db is full. The reply above was shown but may be incomplete after a reload; your message is kept. Free some disk space, then press Regenerate.',
      'Easel could not save the change: the disk holding /data/easel.db is full. Nothing was changed. Free some disk space, then try again.',
      'Easel could not store the imported conversation: the disk holding /data/easel.db is full. Nothing was imported. Free some disk space, then import the file again.',
      'Easel could not delete the conversation: the disk holding /data/easel.db is full. Nothing was deleted. Free some disk space, then try again.',
    ]);
  });
});
