// Two core rules the sampled mutation run of server/core showed untested: unpinning a setting keeps its
// value when no suggestion waits, and a failed write names what was not saved, for every action.
import { describe, expect, it } from 'vitest';
import { applyUserSettings, describeStorageFailure } from '../../../server/core/index.ts';
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
