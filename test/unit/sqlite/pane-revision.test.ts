// The pane's revision: every change of the prompt, its version, the suggestion, the settings, the pins or the
// model's waiting values raises it (a trigger, whoever writes); nothing else does.
import { expect, it } from 'vitest';
import { DEFAULT_SETTINGS, type ConversationStore } from '../../../server/core/index.ts';
import { createSqliteStore } from '../../../server/sqlite/index.ts';

const at = '2026-11-28T10:00:00.000Z';
const META = { prompt: 'a cat', generate_image: false, steps: 20, cfg: 7, seed: -1 };

function openStore(): ConversationStore {
  return createSqliteStore({ path: ':memory:' });
}

it('every pane change raises the revision by one; a message, a rename, an image or a write of the same values do not', () => {
  const store = openStore();
  const id = 'c1';
  store.createConversation({ id, createdAt: at, settings: DEFAULT_SETTINGS });
  const revision = () => store.getConversation(id)?.paneRevision;
  expect(revision()).toBe(0);

  const first = store.addUserPromptVersion(id, 'a fox', at);
  expect(revision()).toBe(1);
  store.addUserPromptVersion(id, 'a fox in snow', at);
  expect(revision()).toBe(2);
  store.selectPromptVersion(id, first);
  expect(revision()).toBe(3);
  store.setSettings(id, { settings: { ...DEFAULT_SETTINGS, steps: 31 }, pinned: ['steps'], settingSuggestions: {} }, { tellModel: true });
  expect(revision()).toBe(4);
  store.setSuggestion(id, { prompt: 'a wolf', turnId: 1 });
  expect(revision()).toBe(5);

  // Not the pane: a message and its reply, a title, the same settings again.
  const { turnId } = store.beginTurn(id, { user: { text: 'hello' }, replaces: [], context: { kind: 'edit', dropFront: 0, dropBack: 0, append: [] } }, at);
  store.saveReplyText(turnId, 'Hi');
  store.finishTurn(id, { turnId, turn: { role: 'assistant', text: 'Hi', metadata: META }, context: { kind: 'edit', dropFront: 0, dropBack: 0, append: [] } }, at);
  store.renameConversation(id, 'Foxes');
  store.setSettings(id, { settings: { ...DEFAULT_SETTINGS, steps: 31 }, pinned: ['steps'], settingSuggestions: {} }, { tellModel: false });
  expect(revision()).toBe(5);

  // A reply that changes the pane raises it once per stored change.
  const next = store.beginTurn(id, { user: { text: 'snowier' }, replaces: [], context: { kind: 'edit', dropFront: 0, dropBack: 0, append: [] } }, at);
  store.finishTurn(
    id,
    {
      turnId: next.turnId,
      turn: { role: 'assistant', text: 'Done.', metadata: META },
      context: { kind: 'edit', dropFront: 0, dropBack: 0, append: [] },
      pane: { version: { prompt: 'a fox, deep snow' }, suggestion: null, settings: { ...DEFAULT_SETTINGS, steps: 31 }, settingSuggestions: {} },
    },
    at,
  );
  expect(revision()).toBeGreaterThan(5);
  store.close();
});
