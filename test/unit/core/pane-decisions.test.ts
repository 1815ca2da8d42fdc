// The pane's pure rules at the edges the whole-folder mutation run of server/core found untested: an empty
// or unchanged proposal, a negative prompt the model leaves out, a pinned value the model agrees with, a
// blank prompt marked ready, the pins of the empty page and redo's newest branch.
import { describe, expect, it } from 'vitest';
import {
  applyReplyPane,
  decideReplyImage,
  decideReplyPane,
  DEFAULT_SETTINGS,
  findRedoVersion,
  pinChangedFrom,
  type PaneState,
  type PromptVersion,
} from '../../../server/core/index.ts';
import type { Metadata } from '../../../server/protocol/index.ts';

const settings = { ...DEFAULT_SETTINGS, steps: 30, cfg: 6, seed: 42, negativePrompt: 'blurry' };
const pane = (over: Partial<PaneState> = {}): PaneState => ({
  paneRevision: 3,
  prompt: 'a fox, snow',
  promptVersion: 4,
  suggestion: null,
  settings,
  pinned: [],
  settingSuggestions: {},
  ...over,
});
const meta = (over: Partial<Metadata> = {}): Metadata => ({ prompt: 'a fox', generate_image: false, steps: 30, cfg: 6, seed: 42, ...over });

describe('decideReplyPane', () => {
  it('an empty prompt from the model changes neither the prompt nor a waiting suggestion', () => {
    const waiting = { prompt: 'older idea', turnId: 2 };
    const change = decideReplyPane(pane({ suggestion: waiting }), meta({ prompt: '' }), 4, 7);
    expect(change.version).toBeUndefined();
    expect(change.suggestion).toBeUndefined();
    expect(applyReplyPane(pane({ suggestion: waiting }), change).prompt).toBe('a fox, snow');
    expect(applyReplyPane(pane({ suggestion: waiting }), change).suggestion).toEqual(waiting);
  });

  it('a proposal equal to the current prompt is no new version and no suggestion, seen or not', () => {
    for (const seen of [4, 3]) {
      const change = decideReplyPane(pane({ suggestion: { prompt: 'x', turnId: 1 } }), meta({ prompt: 'a fox, snow' }), seen, 7);
      expect(change.version).toBeUndefined();
      expect(change.suggestion).toBeNull();
    }
  });

  it('a reply without a negative prompt (or an empty one) leaves the user\'s and its waiting suggestion alone', () => {
    const unpinned = decideReplyPane(pane(), meta({ negative_prompt: '' }), 4, 7);
    expect(unpinned.settings.negativePrompt).toBe('blurry');

    const pinned = pane({ pinned: ['negativePrompt'], settingSuggestions: { negativePrompt: 'lowres' } });
    expect(decideReplyPane(pinned, meta(), 4, 7).settingSuggestions).toEqual({ negativePrompt: 'lowres' });
  });

  it('a pinned value the model agrees with suggests nothing, and drops the older suggestion', () => {
    const state = pane({ pinned: ['steps', 'cfg'], settingSuggestions: { steps: 25 } });
    const change = decideReplyPane(state, meta({ steps: 30, cfg: 9 }), 4, 7);
    expect(change.settingSuggestions).toEqual({ cfg: 9 });
    expect(change.settings).toEqual(settings);
  });
});

describe('decideReplyImage', () => {
  it('a blank prompt marked ready, from the model or in the pane, asks for no image', () => {
    expect(decideReplyImage(meta({ prompt: '   ', generate_image: true }), pane(), true)).toEqual({ kind: 'none' });
    expect(decideReplyImage(meta({ generate_image: true }), pane({ prompt: '  ' }), true)).toEqual({ kind: 'none' });
    expect(decideReplyImage(meta({ generate_image: true }), pane(), true)).toEqual({ kind: 'make' });
  });
});

describe('pinChangedFrom', () => {
  it('pins exactly the values changed from the defaults', () => {
    expect(pinChangedFrom(DEFAULT_SETTINGS, DEFAULT_SETTINGS)).toEqual([]);
    expect(pinChangedFrom(DEFAULT_SETTINGS, { ...DEFAULT_SETTINGS, cfg: DEFAULT_SETTINGS.cfg + 1, negativePrompt: 'blurry' })).toEqual(['cfg', 'negativePrompt']);
  });
});

describe('findRedoVersion', () => {
  const version = (id: number): PromptVersion => ({ id, parentId: 1, prompt: `p${id}`, source: 'user', turnId: null, createdAt: '' });

  it('goes to the newest child whatever the order they come in, and nowhere without one', () => {
    expect(findRedoVersion([version(3), version(5), version(4)])).toBe(5);
    expect(findRedoVersion([version(5), version(4)])).toBe(5);
    expect(findRedoVersion([])).toBeNull();
  });
});
