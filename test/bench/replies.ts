// The replies the bench has the fake Ollama send. Shared by the bench and its fake process, so both
// know the exact tokens without sending them over IPC.
import { splitIntoChunks } from '../fakes/fake-ollama.ts';

export const BENCH_METADATA = { prompt: 'a tabby cat wearing a blue wizard hat', generate_image: false, steps: 20, cfg: 7, seed: -1 };

/** The reply's machine part, in the fake's usual 3–6 character tokens: never shown, never counted as a token. */
export const METADATA_TAIL = splitIntoChunks(`\n---\n${JSON.stringify(BENCH_METADATA)}`);

// Tokens of 1–2 characters (1.6 on average): Easel stops a reply at 200 000 characters (MAX_REPLY_CHARS), so a
// 100 000-token flood must stay under 2 characters a token. Plain prose: no character that could start a marker.
const FLOOD_WORDS = ['Th', 'e', ' c', 'at', ' w', 'ea', 'rs', ' a', ' b', 'lu', 'e', ' h', 'at', ',', ' a', 'nd', ' i', 't', ' s', 'mi', 'le', 's', '.'];
const FLOOD_LINE_TOKENS = 48;

/** `count` short prose tokens, a newline every 48, then the metadata tail. */
export function floodChunks(count: number): string[] {
  const chunks: string[] = [];
  for (let i = 0; i < count; i++) {
    chunks.push(i % FLOOD_LINE_TOKENS === FLOOD_LINE_TOKENS - 1 ? '\n' : (FLOOD_WORDS[i % FLOOD_WORDS.length] as string));
  }
  return [...chunks, ...METADATA_TAIL];
}

/** What a client is shown of floodChunks(count): the tokens, without the trailing newline a marker would swallow. */
export function floodText(count: number): string {
  return floodChunks(count).slice(0, count).join('').trimEnd();
}

/**
 * Token `i` of a paced reply: ` w<i>q`. Each is unique and no token's text is inside another's, so a client can
 * find when token `i` arrived in whatever framing carries it (JSON or HTML; neither escapes these characters).
 */
export function pacedToken(i: number): string {
  return ` w${i}q`;
}

/** What a client is shown of pacedChunks(count), and what is stored. */
export function pacedText(count: number): string {
  return Array.from({ length: count }, (_, i) => pacedToken(i)).join('').trim();
}

export function pacedChunks(count: number): string[] {
  return [...Array.from({ length: count }, (_, i) => pacedToken(i)), ...METADATA_TAIL];
}

/** A reply of about `chars` characters of prose (a long answer), in 3–6 character tokens. */
export function proseChunks(chars: number, turn: number): string[] {
  const sentence = `Turn ${turn}: the cat sits under a wide blue hat, and the stars on its brim catch the light. `;
  let text = '';
  while (text.length < chars) text += sentence;
  return [...splitIntoChunks(text.slice(0, chars).trimEnd()), ...METADATA_TAIL];
}

export function proseText(chars: number, turn: number): string {
  return proseChunks(chars, turn).slice(0, -METADATA_TAIL.length).join('');
}
