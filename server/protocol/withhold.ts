// The one delimiter rule. Every model reply ends with a line `---` and a JSON object meant for the
// server only; the user must never see it. Seed 002's lesson is to withhold before displaying:
// markup recognised after bytes reached the browser is already on screen. So the stream is cut
// here, on the server, before any chunk is forwarded, and streaming stops at the marker because
// everything after it is machine data that the parser reads once the reply is complete.
//
// The withholder is a character-level state machine. It releases text as soon as it is certain
// that the text cannot belong to a marker and holds back only:
//   - a trailing run of whitespace (never shown before a marker, dropped at the end), and
//   - a candidate marker:
//       `---` line ......... a delimiter when the next non-blank line starts with `{` or a ```
//                            fence, or the stream ends. A `---` followed by prose is a Markdown
//                            rule and is released as text together with the start of that prose.
//       `--- {` ............ a delimiter with the JSON on the same line.
//       other rule line .... `***`, `___`, `===`, `—`, `- - -`, `----`: a delimiter only when
//                            metadata (below) follows, on its line or the next non-blank one.
//       `{` line ........... metadata without delimiter when its first key is `prompt` or
//                            `generate_image` (any case or style, quoted or not) followed by `:`.
//       `{` in a line ...... the same, at the end of a prose line (`here you go! {"prompt": …`).
//       ``` / ```json line . metadata in a fence when its content begins such an object.
// Every character is examined once and a rejected candidate is released without rescanning, so
// the cost is linear in the reply length whatever the chunking. That needs one care: a candidate
// rejects at the first character that could start another marker (a key never starts with `-`).
// Rules, fence languages and keys are bounded, so at most MAX_HELD_CHARS visible characters wait.

import {
  MAX_KEY_CHARS,
  MAX_RULE_CHARS,
  isFenceLanguage,
  isFenceLanguagePrefix,
  isKeyChar,
  isKeyStartChar,
  isLineSpace,
  isMetadataKey,
  isMetadataKeyPrefix,
  isRuleChar,
  isRuleLength,
  isWhitespace,
  normaliseKeyName,
} from './delimiter.ts';

/**
 * Where the withheld machine part starts: `delimiter` (`---`), `rule` (another Markdown rule),
 * `bare-json` (a `{` line), `inline-json` (a `{` after prose on its line), `fence` (```).
 */
export type MarkerKind = 'delimiter' | 'rule' | 'bare-json' | 'inline-json' | 'fence';

export interface WithheldReply {
  /** Everything displayed: all `push` outputs followed by `flushed`. */
  shown: string;
  /** Everything pushed, unchanged. */
  raw: string;
  /** The withheld machine part, starting at the marker (rule, `{` or the fence), or null. */
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

type ObjectVia = 'rule' | 'bare-json' | 'inline-json' | 'fence';

type Candidate =
  /** `inner`: a space between rule characters (`- - -`); `gap`: a space since the last one. */
  | { kind: 'rule'; char: string; count: number; gap: boolean; inner: boolean }
  | { kind: 'after-delimiter'; backticks: number }
  | { kind: 'fence'; via: 'rule' | 'fence'; backticks: number; lang: string; spaced: boolean }
  | {
      kind: 'object';
      via: ObjectVia;
      phase: 'before-brace' | 'before-key' | 'key' | 'after-key';
      /** A fence was already opened (after a rule), so another one is text. */
      fenced: boolean;
      quote: string;
      /** The key so far, normalised, and how many characters it had as written. */
      key: string;
      keyChars: number;
    };

/** A new candidate state means: keep holding. */
type Step = Candidate | 'confirm' | 'reject';

export function createWithholder(): Withholder {
  const rawParts: string[] = [];
  const shownParts: string[] = [];
  // Held-back text: a whitespace run, then (from candidateStart) the candidate marker if any.
  let held = '';
  let candidate: Candidate | null = null;
  // Stryker disable next-line UnaryOperator: read only while a candidate exists, and set when one starts
  let candidateStart = -1;
  // True while only spaces/tabs/\r have been seen since the last \n (or the start of the reply).
  let lineStart = true;
  let marker: MarkerKind | null = null;
  let tail: string | null = null;
  // What this push (or finish) releases, joined into shownParts once per call.
  let out = '';
  let finished: WithheldReply | null = null;

  function emit(text: string): void {
    // Leading whitespace of the reply is never shown (Ollama's Mistral often starts with a space).
    out += shownParts.length === 0 && out === '' ? text.replace(/^[ \t\r\n\f\v]+/, '') : text;
  }

  function release(): string {
    const released = out;
    if (released !== '') shownParts.push(released);
    out = '';
    return released;
  }

  /** Releases the held text up to its last non-whitespace character; keeps the whitespace after. */
  function rejectCandidate(): void {
    let end = held.length;
    // Stryker disable next-line EqualityOperator,ConditionalExpression: charAt(-1) is '', not whitespace
    while (end > 0 && isWhitespace(held.charAt(end - 1))) end -= 1;
    emit(held.slice(0, end));
    held = held.slice(end);
    candidate = null;
    // Stryker disable next-line UnaryOperator: read only while a candidate exists, and set when one starts
    candidateStart = -1;
  }

  function capture(kind: MarkerKind, ch: string): void {
    marker = kind;
    tail = held.slice(candidateStart) + ch;
    // Stryker disable next-line StringLiteral: held is not read again after a capture
    held = '';
    candidate = null;
    // Stryker disable next-line UnaryOperator: read only while a candidate exists, and set when one starts
    candidateStart = -1;
  }

  function step(ch: string): void {
    const atLineStart = lineStart;
    lineStart = ch === '\n' ? true : isWhitespace(ch) ? lineStart : false;

    if (candidate !== null) {
      const next: Step = advance(candidate, ch);
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
    const next = startCandidate(ch, atLineStart);
    if (next !== null) {
      candidate = next;
      candidateStart = held.length;
      held += ch;
      return;
    }
    emit(held + ch);
    held = '';
  }

  /** Shows `chunk[start, end)` (no `{`, no newline) after the held whitespace, and holds its trailing whitespace. */
  function releaseRun(chunk: string, start: number, end: number): void {
    let visibleEnd = end;
    while (visibleEnd > start && isWhitespaceCode(chunk.charCodeAt(visibleEnd - 1))) visibleEnd -= 1;
    if (visibleEnd === start) {
      held += chunk.slice(start, end);
      return;
    }
    emit(held + chunk.slice(start, visibleEnd));
    held = chunk.slice(visibleEnd, end);
  }

  function push(chunk: string): string {
    if (finished !== null) throw new Error('push() was called after finish(); create a new withholder per reply.');
    rawParts.push(chunk);
    // Where the next `{` and `\n` are, found once per chunk and again only when passed (linear).
    let brace = -1;
    let newline = -1;
    let index = 0;
    while (index < chunk.length) {
      if (tail !== null) {
        // Past the marker nothing is examined any more: the rest is machine data.
        tail += chunk.slice(index);
        break;
      }
      // Stryker disable next-line ConditionalExpression,BlockStatement: without the fast path step() makes the same decisions a character at a time (only slower)
      if (candidate === null && !lineStart) {
        // Fast path, the same decisions as step(): mid-line with no candidate, only `{` can start one and
        // a newline can make the next character a line start; whitespace before them is only held.
        // Stryker disable next-line all: a position found too often or never only sends more characters through step(), which decides the same
        if (brace < index) brace = indexOrEnd(chunk, '{', index);
        // Stryker disable next-line all: a position found too often or never only sends more characters through step(), which decides the same
        if (newline < index) newline = indexOrEnd(chunk, '\n', index);
        const end = Math.min(brace, newline);
        // Stryker disable next-line ConditionalExpression,BlockStatement: without the fast path step() makes the same decisions a character at a time (only slower)
        if (end > index) {
          releaseRun(chunk, index, end);
          index = end;
          continue;
        }
      }
      const ch = String.fromCodePoint(chunk.codePointAt(index) as number);
      step(ch);
      index += ch.length;
    }
    return release();
  }

  function finish(): WithheldReply {
    if (finished !== null) return finished;
    if (candidate !== null) {
      const kind = markerAtEnd(candidate);
      if (kind !== null) capture(kind, '');
      else rejectCandidate();
    }
    // Trailing whitespace is dropped: it would only ever separate the text from a marker.
    // Stryker disable next-line StringLiteral: held is not read again after finish()
    held = '';
    const flushed = release();
    finished = { shown: shownParts.join(''), raw: rawParts.join(''), tail, marker, flushed };
    return finished;
  }

  return { push, finish };
}

function indexOrEnd(chunk: string, search: string, from: number): number {
  const found = chunk.indexOf(search, from);
  // Stryker disable next-line ConditionalExpression: −1 sends the chunk through step(), which decides the same
  return found === -1 ? chunk.length : found;
}

/** isWhitespace by character code: space, \t, \n, \v, \f, \r. */
function isWhitespaceCode(code: number): boolean {
  return code === 0x20 || (code >= 0x09 && code <= 0x0d);
}

/** A `{` may open metadata anywhere; rules and fences only at the start of a line. */
function startCandidate(ch: string, atLineStart: boolean): Candidate | null {
  // Stryker disable next-line BooleanLiteral: fenced is read only for a rule's object before its `{`
  if (ch === '{') return openObject(atLineStart ? 'bare-json' : 'inline-json', false);
  if (!atLineStart) return null;
  if (isRuleChar(ch)) return { kind: 'rule', char: ch, count: 1, gap: false, inner: false };
  // Stryker disable next-line BooleanLiteral: inWord is true while the language is empty, whatever spaced says
  if (ch === '`') return { kind: 'fence', via: 'fence', backticks: 1, lang: '', spaced: false };
  return null;
}

function openObject(via: ObjectVia, fenced: boolean): Candidate {
  return { kind: 'object', via, phase: 'before-key', fenced, quote: '', key: '', keyChars: 0 };
}

function markerOf(candidate: Candidate): MarkerKind {
  if (candidate.kind === 'object') return candidate.via;
  if (candidate.kind === 'fence') return candidate.via;
  return 'delimiter';
}

/** The exact delimiter line `---` (spaces allowed after it, not between the dashes). */
function isDelimiterLine(candidate: Extract<Candidate, { kind: 'rule' }>): boolean {
  return candidate.char === '-' && candidate.count === 3 && !candidate.inner;
}

/** Decides what an undecided candidate is when the stream ends. */
function markerAtEnd(candidate: Candidate): MarkerKind | null {
  switch (candidate.kind) {
    case 'rule':
      // A final `---` line is a delimiter whose JSON never came; the parser reports it. Any other
      // rule is Markdown: it is a delimiter only when metadata follows it.
      return isDelimiterLine(candidate) ? 'delimiter' : null;
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
    case 'rule':
      return advanceRule(candidate, ch);
    case 'after-delimiter':
      return advanceAfterDelimiter(candidate, ch);
    case 'fence':
      return advanceFence(candidate, ch);
    case 'object':
      return advanceObject(candidate, ch);
  }
}

function advanceRule(candidate: Extract<Candidate, { kind: 'rule' }>, ch: string): Step {
  if (ch === candidate.char) {
    if (candidate.count >= MAX_RULE_CHARS) return 'reject';
    return { ...candidate, count: candidate.count + 1, inner: candidate.inner || candidate.gap, gap: false };
  }
  if (isLineSpace(ch)) return { ...candidate, gap: true };
  // `--`, `- item`, `**bold**`, `--- yes`, `----x`: ordinary text.
  if (!isRuleLength(candidate.char, candidate.count)) return 'reject';
  const delimiter = isDelimiterLine(candidate);
  // Stryker disable next-line BooleanLiteral: fenced is read only for a rule's object before its `{`, and this one has passed it
  if (ch === '{') return delimiter ? 'confirm' : openObject('rule', false);
  // The rule line is complete; whether it is a delimiter depends on the next non-blank line.
  if (ch === '\n') {
    return delimiter
      ? { kind: 'after-delimiter', backticks: 0 }
      : { kind: 'object', via: 'rule', phase: 'before-brace', fenced: false, quote: '', key: '', keyChars: 0 };
  }
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
  if (ch === '\n' || ch === '{') {
    if (!isFenceLanguage(candidate.lang)) return 'reject';
    // A one-line fence (```` ```{"prompt": …}``` ````) opens the object at once.
    return ch === '{'
      ? openObject(candidate.via, true)
      : { kind: 'object', via: candidate.via, phase: 'before-brace', fenced: true, quote: '', key: '', keyChars: 0 };
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
      if (ch === '{') return { ...candidate, phase: 'before-key' };
      // A rule, then a fenced block holding the metadata.
      // Stryker disable next-line ConditionalExpression: a fence's object is created fenced, so a second fence is refused either way
      if (ch === '`' && candidate.via === 'rule' && !candidate.fenced) {
        // Stryker disable next-line BooleanLiteral: inWord is true while the language is empty, whatever spaced says
        return { kind: 'fence', via: 'rule', backticks: 1, lang: '', spaced: false };
      }
      return 'reject';
    case 'before-key':
      if (isWhitespace(ch)) return candidate;
      if (ch === '"' || ch === "'") return { ...candidate, phase: 'key', quote: ch };
      if (isKeyStartChar(ch)) return withKeyChar(candidate, ch);
      return 'reject';
    case 'key': {
      if (candidate.quote !== '') {
        if (ch === candidate.quote) return isMetadataKey(candidate.key) ? { ...candidate, phase: 'after-key' } : 'reject';
        return withKeyChar(candidate, ch);
      }
      if (isKeyChar(ch)) return withKeyChar(candidate, ch);
      if (!isMetadataKey(candidate.key)) return 'reject';
      return advanceObject({ ...candidate, phase: 'after-key' }, ch);
    }
    case 'after-key':
      // The `:` tells a key from prose that merely names it (`use the {prompt} field`).
      if (isWhitespace(ch)) return candidate;
      return ch === ':' ? 'confirm' : 'reject';
  }
}

function withKeyChar(candidate: Extract<Candidate, { kind: 'object' }>, ch: string): Step {
  const key = candidate.key + normaliseKeyName(ch);
  const keyChars = candidate.keyChars + 1;
  return keyChars <= MAX_KEY_CHARS && isMetadataKeyPrefix(key) ? { ...candidate, phase: 'key', key, keyChars } : 'reject';
}
