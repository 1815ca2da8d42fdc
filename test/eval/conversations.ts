// The fixed conversations of the model report card (`npm run eval`) and of the live suite: the same
// words every run, so two models (or two versions of the prompts) can be compared turn for turn.

/** One step of a scripted conversation: a message, a hand edit of the prompt pane, or changed settings. */
export type EvalStep =
  | { say: string }
  | { editPrompt: string }
  | { settings: { steps?: number; cfg?: number; seed?: number } };

export interface EvalConversation {
  name: string;
  steps: EvalStep[];
}

/** Story 010's ten multi-turn conversations (the live suite runs them as they are). */
export const LIVE_CONVERSATIONS: string[][] = [
  ['a cat in a hat', 'a tabby cat, a blue wizard hat', 'yes, generate it'],
  ['I want a landscape', 'mountains at sunset, oil painting', 'looks good, make it'],
  ['a portrait of an old sailor', 'weathered face, pipe, stormy sea behind', 'go ahead'],
  ['something cozy', 'a reading nook with rain on the window', 'warm lamp light please', 'generate'],
  ['a robot', 'friendly, retro 1950s style, tin toy', 'yes'],
  ['a logo for a coffee shop', 'minimal, a fox holding a cup, flat vector', 'perfect, generate'],
  ['a fantasy castle', 'floating in the clouds, golden hour', 'add dragons circling it', 'make the image'],
  ['a bowl of ramen', 'top-down food photography, steam rising', 'yes please'],
  ['an astronaut', 'riding a horse on mars, photorealistic', 'generate it now'],
  ['a city street', 'tokyo at night, neon, rain reflections', 'cinematic wide shot', 'go'],
];

/** What a user does besides talking: edits the prompt by hand, asks for settings, changes them in the panel. */
const EDITS_AND_SETTINGS: EvalConversation[] = [
  {
    name: 'prompt edited by hand',
    steps: [
      { say: 'a cat in a hat, tabby, blue wizard hat; write the prompt now' },
      { editPrompt: 'a black dog wearing a red fez, studio photo' },
      { say: 'make it a night scene' },
      { say: 'generate it' },
    ],
  },
  {
    name: 'settings asked for in the chat',
    steps: [{ say: 'a mountain lake at dawn' }, { say: 'use 40 steps and cfg 5' }, { say: 'and a fixed seed of 1234, then generate' }],
  },
  {
    name: 'settings changed in the panel',
    steps: [
      { say: 'a steampunk airship' },
      { settings: { steps: 35, cfg: 9, seed: 77 } },
      { say: 'more brass and smoke' },
      { say: 'make it' },
    ],
  },
  {
    name: 'prompt edit and settings together',
    steps: [
      { say: 'a watercolour of a fox' },
      { editPrompt: 'a watercolour fox in autumn leaves, soft light' },
      { settings: { cfg: 6 } },
      { say: 'add a small bird on a branch' },
      { say: 'go' },
    ],
  },
];

function fromLive(index: number): EvalConversation {
  const messages = LIVE_CONVERSATIONS[index] ?? [];
  return { name: messages[0] ?? `conversation ${index + 1}`, steps: messages.map((say) => ({ say })) };
}

/**
 * All 14, interleaved so that any first N mixes the kinds: the default 10 hold every edit and settings
 * conversation and six of the live ones.
 */
export const EVAL_CONVERSATIONS: readonly EvalConversation[] = [
  fromLive(0),
  EDITS_AND_SETTINGS[0]!,
  fromLive(1),
  EDITS_AND_SETTINGS[1]!,
  fromLive(2),
  EDITS_AND_SETTINGS[2]!,
  fromLive(3),
  EDITS_AND_SETTINGS[3]!,
  ...[4, 5, 6, 7, 8, 9].map(fromLive),
];

export const DEFAULT_CONVERSATIONS = 10;

/** The number of model turns (messages sent) in these conversations. */
export function countTurns(conversations: readonly EvalConversation[]): number {
  return conversations.reduce((sum, conversation) => sum + conversation.steps.filter((step) => 'say' in step).length, 0);
}
