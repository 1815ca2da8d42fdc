// The one delimiter rule. Every model reply ends with a line `---` and a JSON object meant for the
// server only; the user must never see it. Seed 002's lesson is to withhold before displaying:
// markup recognised after bytes reached the browser is already on screen. So the stream is cut
// here, on the server, before any chunk is forwarded, and streaming stops at `---` because
// everything after it is machine data that the parser reads once the reply is complete.
//
// The withholder is a character-level state machine. It releases text as soon as it is certain
// that the text cannot belong to a marker and holds back only:
//   - a trailing run of whitespace (never shown before a marker, dropped at the end), and
//   - a candidate marker starting at the beginning of a line (after optional spaces/tabs):
//       `---` line ......... a delimiter only when the next non-blank line starts with `{` or a
//                            ``` fence, or the stream ends. A `---` followed by prose is a Markdown
//                            rule and is released as text together with the start of that prose.
//       `--- {` ............ a delimiter with the JSON on the same line.
//       `{` line ........... metadata without delimiter when its first key is `prompt` or
//                            `generate_image` (quoted with " or ', or unquoted).
//       ``` / ```json line . metadata in a fence when its content begins such an object.
// Every character is examined once and a rejected candidate is released without rescanning, so
// the cost is linear in the reply length whatever the chunking.

import {
  MAX_CANDIDATE_CHARS,
  isFenceLanguage,
  isFenceLanguagePrefix,
  isKeyChar,
  isLineSpace,
  isMetadataKey,
  isMetadataKeyPrefix,
  isWhitespace,
} from './delimiter.ts';

export type MarkerKind = 'delimiter' | 'bare-json' | 'fence';

export interface WithheldReply {
  /** Everything displayed: all `push` outputs followed by `flushed`. */
  shown: string;
  /** Everything pushed, unchanged. */
  raw: string;
  /** The withheld machine part, starting at the marker (`---`, `{` or the fence), or null. */
  tail: string | null;
  marker: MarkerKind | null;
  /** What `finish` released for display. */
  flushed: string;
}

export interface Withholder {
  /** Feeds a chunk of the model's reply; returns the text that is safe to display now ('' if none). */
  push(chunk: string): string;
  /** Ends the reply: releases undecided text and returns the split between shown and withheld. */
  finish(): WithheldReply;
}

type Candidate =
  | { kind: 'dash'; dashes: number; spaced: boolean }
  | { kind: 'after-delimiter'; backticks: number }
  | { kind: 'fence'; backticks: number; lang: string; spaced: boolean }
  | {
      kind: 'object';
      via: 'bare-json' | 'fence';
      phase: 'before-brace' | 'before-key' | 'key';
      quote: string;
      key: string;
    };

/** A new candidate state means: keep holding. */
type Step = Candidate | 'confirm' | 'reject';

export function createWithholder(): Withholder {
  const rawParts: string[] = [];
  const shownParts: string[] = [];
  // Held-back text: a whitespace run, then (from candidateStart) the candidate marker if any.
  let held = '';
  let candidate: Candidate | null = null;
  let candidateStart = -1;
  // True while only spaces/tabs/\r have been seen since the last \n (or the start of the reply).
  let lineStart = true;
  let marker: MarkerKind | null = null;
  let tail: string | null = null;
  let out: string[] = [];
  let finished: WithheldReply | null = null;

  function emit(text: string): void {
    // Leading whitespace of the reply is never shown (Ollama's Mistral often starts with a space).
    const visible = shownParts.length === 0 ? text.replace(/^[ \t\r\n\f\v]+/, '') : text;
    if (visible === '') return;
    shownParts.push(visible);
    out.push(visible);
  }

  /** Releases the held text up to its last non-whitespace character; keeps the whitespace after. */
  function rejectCandidate(): void {
    let end = held.length;
    while (end > 0 && isWhitespace(held.charAt(end - 1))) end -= 1;
    emit(held.slice(0, end));
    held = held.slice(end);
    candidate = null;
    candidateStart = -1;
  }

  function capture(kind: MarkerKind, ch: string): void {
    marker = kind;
    tail = held.slice(candidateStart) + ch;
    held = '';
    candidate = null;
    candidateStart = -1;
  }

  function startCandidate(ch: string): Candidate | null {
    if (ch === '-') return { kind: 'dash', dashes: 1, spaced: false };
    if (ch === '{') return { kind: 'object', via: 'bare-json', phase: 'before-key', quote: '', key: '' };
    if (ch === '`') return { kind: 'fence', backticks: 1, lang: '', spaced: false };
    return null;
  }

  function step(ch: string): void {
    const atLineStart = lineStart;
    lineStart = ch === '\n' ? true : isWhitespace(ch) ? lineStart : false;

    if (candidate !== null) {
      const next: Step = held.length - candidateStart >= MAX_CANDIDATE_CHARS ? 'reject' : advance(candidate, ch);
      if (next === 'confirm') {
        capture(markerOf(candidate), ch);
        return;
      }
      if (next !== 'reject') {
        candidate = next;
        held += ch;
        return;
      }
      rejectCandidate();
    }

    if (isWhitespace(ch)) {
      held += ch;
      return;
    }
    const next = atLineStart ? startCandidate(ch) : null;
    if (next !== null) {
      candidate = next;
      candidateStart = held.length;
      held += ch;
      return;
    }
    emit(held + ch);
    held = '';
  }

  function push(chunk: string): string {
    if (finished !== null) throw new Error('push() was called after finish(); create a new withholder per reply.');
    rawParts.push(chunk);
    out = [];
    let index = 0;
    for (const ch of chunk) {
      if (tail !== null) {
        // Past the marker nothing is examined any more: the rest is machine data.
        tail += chunk.slice(index);
        break;
      }
      step(ch);
      index += ch.length;
    }
    return out.join('');
  }

  function finish(): WithheldReply {
    if (finished !== null) return finished;
    out = [];
    if (candidate !== null) {
      const kind = markerAtEnd(candidate);
      if (kind !== null) capture(kind, '');
      else rejectCandidate();
    }
    // Trailing whitespace is dropped: it would only ever separate the text from a marker.
    held = '';
    const flushed = out.join('');
    finished = { shown: shownParts.join(''), raw: rawParts.join(''), tail, marker, flushed };
    return finished;
  }

  return { push, finish };
}

function markerOf(candidate: Candidate): MarkerKind {
  if (candidate.kind === 'object') return candidate.via;
  if (candidate.kind === 'fence') return 'fence';
  return 'delimiter';
}

/** Decides what an undecided candidate is when the stream ends. */
function markerAtEnd(candidate: Candidate): MarkerKind | null {
  switch (candidate.kind) {
    case 'dash':
      // A final `---` line is a delimiter whose JSON never came; the parser reports it.
      return candidate.dashes === 3 ? 'delimiter' : null;
    case 'after-delimiter':
      return candidate.backticks === 0 ? 'delimiter' : null;
    case 'fence':
      return null;
    case 'object':
      // A `{` whose first key was still plausible is most likely metadata cut off by the length
      // limit: withholding it is the safe side (a lone closing fence, by contrast, is text).
      return candidate.phase === 'before-brace' ? null : candidate.via;
  }
}

/** Advances a candidate by one character: a new state to keep holding, or a decision. */
function advance(candidate: Candidate, ch: string): Step {
  switch (candidate.kind) {
    case 'dash':
      return advanceDash(candidate, ch);
    case 'after-delimiter':
      return advanceAfterDelimiter(candidate, ch);
    case 'fence':
      return advanceFence(candidate, ch);
    case 'object':
      return advanceObject(candidate, ch);
  }
}

function advanceDash(candidate: Extract<Candidate, { kind: 'dash' }>, ch: string): Step {
  if (candidate.dashes < 3) {
    return ch === '-' ? { kind: 'dash', dashes: candidate.dashes + 1, spaced: false } : 'reject';
  }
  if (ch === '{') return 'confirm';
  if (isLineSpace(ch)) return { kind: 'dash', dashes: 3, spaced: true };
  // The line is exactly `---`; whether it is a delimiter depends on the next non-blank line.
  if (ch === '\n') return { kind: 'after-delimiter', backticks: 0 };
  // `----`, `--- yes`: more text on the line, so it is ordinary text.
  return 'reject';
}

function advanceAfterDelimiter(candidate: Extract<Candidate, { kind: 'after-delimiter' }>, ch: string): Step {
  if (candidate.backticks === 0) {
    if (isWhitespace(ch)) return candidate;
    if (ch === '{') return 'confirm';
  }
  if (ch === '`') {
    return candidate.backticks === 2 ? 'confirm' : { kind: 'after-delimiter', backticks: candidate.backticks + 1 };
  }
  // Prose after the `---` line: it was a Markdown rule, not a delimiter.
  return 'reject';
}

function advanceFence(candidate: Extract<Candidate, { kind: 'fence' }>, ch: string): Step {
  if (candidate.backticks < 3) {
    return ch === '`' ? { ...candidate, backticks: candidate.backticks + 1 } : 'reject';
  }
  if (ch === '\n') {
    return isFenceLanguage(candidate.lang)
      ? { kind: 'object', via: 'fence', phase: 'before-brace', quote: '', key: '' }
      : 'reject';
  }
  if (isLineSpace(ch)) return { ...candidate, spaced: true };
  // The info string may follow spaces (``` json) but is one word.
  const inWord = candidate.lang === '' || !candidate.spaced;
  if (inWord && isFenceLanguagePrefix(candidate.lang + ch)) return { ...candidate, lang: candidate.lang + ch, spaced: false };
  return 'reject';
}

function advanceObject(candidate: Extract<Candidate, { kind: 'object' }>, ch: string): Step {
  switch (candidate.phase) {
    case 'before-brace':
      if (isWhitespace(ch)) return candidate;
      return ch === '{' ? { ...candidate, phase: 'before-key' } : 'reject';
    case 'before-key':
      if (isWhitespace(ch)) return candidate;
      if (ch === '"' || ch === "'") return { ...candidate, phase: 'key', quote: ch };
      if (isKeyChar(ch) && isMetadataKeyPrefix(ch)) return { ...candidate, phase: 'key', key: ch };
      return 'reject';
    case 'key': {
      const closed = candidate.quote === '' ? !isKeyChar(ch) : ch === candidate.quote;
      if (closed) return isMetadataKey(candidate.key) ? 'confirm' : 'reject';
      const key = candidate.key + ch;
      return isMetadataKeyPrefix(key) ? { ...candidate, key } : 'reject';
    }
  }
}
