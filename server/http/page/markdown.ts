// The model's replies as Markdown, rendered on the server so a streamed reply and a reloaded one are the
// same HTML. markdown-it with `html: false` escapes every tag the model writes; links are only http(s) and
// mailto, open in a new tab, and never load anything by themselves (images become links).
import MarkdownIt, { type Delimiter, type MarkdownIt as MarkdownItInstance, type StateCore, type StateInline, type Token } from 'markdown-it';
import { raw } from 'hono/html';
import type { Html } from './markup.ts';

export type MarkdownRenderer = Pick<MarkdownItInstance, 'parse' | 'render' | 'renderer' | 'options'>;

/** The one configuration of markdown-it the page uses, for whole replies and streamed blocks alike. */
export function createMarkdownRenderer(): MarkdownRenderer {
  const md = new MarkdownIt('default', { html: false, breaks: true, linkify: false });
  // A reference definition later in a reply would change a link in an earlier block: blocks would no
  // longer render on their own. Images would load from wherever the model points: shown as links instead.
  md.disable(['reference', 'image']);
  // Stryker disable next-line MethodExpression: markdown-it hands over a link destination without surrounding whitespace
  md.validateLink = (url) => /^(https?:\/\/|mailto:)/i.test(url.trim());
  md.renderer.rules.link_open = (tokens, index, options, _env, self) => {
    const token = tokens[index]!;
    token.attrSet('target', '_blank');
    token.attrSet('rel', 'noopener noreferrer');
    return self.renderToken(tokens, index, options);
  };
  // Table alignment comes as a style attribute, which the page's CSP (style-src 'self') refuses: a class instead.
  // Stryker disable next-line StringLiteral: a rule's name is only used to turn it on or off by name, which Easel never does
  md.core.ruler.push('easel_align_class', (state) => {
    for (const token of state.tokens) {
      // Stryker disable next-line ConditionalExpression: markdown-it gives only table cells a style attribute
      if (token.type !== 'th_open' && token.type !== 'td_open') continue;
      const style = token.attrGet('style');
      if (typeof style !== 'string') continue;
      // Stryker disable next-line ArrowFunction,ConditionalExpression: markdown-it gives a cell no other attribute
      token.attrs = (token.attrs ?? []).filter(([name]) => name !== 'style');
      token.attrJoin('class', `align-${style.replace('text-align:', '')}`);
    }
  });
  // The page's own headings are the h1 (Easel) and the h2 of its sections (the conversation's title among
  // them): a reply's headings sit below those, so `#` is an h3 and `##` an h4 (h6 at most), live and after a reload.
  // Stryker disable next-line StringLiteral: a rule's name is only used to turn it on or off by name, which Easel never does
  md.core.ruler.push('easel_heading_level', (state) => {
    for (const token of state.tokens) {
      if (token.type === 'heading_open' || token.type === 'heading_close') token.tag = `h${Math.min(6, Number(token.tag.slice(1)) + HEADING_SHIFT)}`;
    }
  });
  dropUnfinishedMarkers(md);
  return md;
}

/** How many levels a reply's headings go down: the page already holds an h1 and h2s. */
const HEADING_SHIFT = 2;

/** The inline content a reply ends in (see dropUnfinishedMarkers), known by its tokens' array. */
const endingInlines = new WeakSet<Token[]>();
/** The emphasis and strikethrough markers of that content that start a word (see startsWord). */
const wordStartMarkers = new WeakSet<Delimiter>();

/**
 * Whether a marker at `start` starts a word: after a space, at the start, or after an opening bracket, a quote or
 * another marker. `window.__ran` or `a*b` hold markers inside a word, which are the text's own characters.
 */
function startsWord(source: string, start: number): boolean {
  return start === 0 || /[\s([{"'“‘«*_~`]/.test(source[start - 1]!);
}

/**
 * A reply cut off mid-way (Stop, an error, the length limit, a crash) can end inside emphasis or code: "I imagine
 * **slo". Markdown shows an opener nothing closes as the literal character, which no reader wants, so the block a
 * reply ends with (its last inline content, when nothing but closing tags follows it) drops from the display:
 * - an opening `**`, `*`, `_`, `__` or `~~` that starts a word and that nothing closes ("**slo" → "slo"),
 * - a backtick run that starts a word, is followed by a character that is not a space, and that no run closes,
 * - the marker run the text ends with ("I imagine **", "I imagine `").
 * The same whatever the reply's status, so streamed (its last block is rendered at its end) and reloaded replies
 * agree, and a reply whose text was kept after a cut (its metadata asked for alone) is shown the same way: an
 * unclosed marker starting a word is broken formatting wherever it comes from. Only the display changes: the stored
 * text, what the model sees, Copy's source and the export keep every character. Earlier blocks are untouched (a stray
 * marker there is not the end: it renders as the model wrote it, and a block renders the same whether the reply goes
 * on or not). What closes (`**bold**`, `snake_case`, `2 * 3`) and what sits inside a word (`window.__ran`) is unchanged.
 */
function dropUnfinishedMarkers(md: MarkdownItInstance): void {
  // Stryker disable next-line StringLiteral: a rule's name is only used to turn it on or off by name, which Easel never does
  md.core.ruler.before('inline', 'easel_ending_inline', (state: StateCore) => {
    for (let index = state.tokens.length - 1; index >= 0; index--) {
      const token = state.tokens[index]!;
      if (token.type === 'inline') {
        if (token.children) endingInlines.add(token.children);
        return;
      }
      if (token.nesting !== -1) return;
    }
  });
  const rule = (name: string) => md.inline.ruler.__rules__.find((found) => found.name === name)!.fn;
  // A backtick run that no run of the same length closes is kept as text by markdown-it (added to `pending`).
  const backticks = rule('backticks');
  md.inline.ruler.at('backticks', (state: StateInline, silent: boolean) => {
    const start = state.pos;
    const tokens = state.tokens.length;
    const pending = state.pending.length;
    const matched = backticks(state, silent);
    if (matched && !silent && state.tokens.length === tokens && endingInlines.has(state.tokens)) {
      const atEnd = state.pos >= state.src.length;
      if (atEnd || (startsWord(state.src, start) && /\S/.test(state.src[state.pos]!))) state.pending = state.pending.slice(0, pending);
    }
    return matched;
  });
  // Which markers start a word is known only where they are read.
  for (const name of ['strikethrough', 'emphasis']) {
    const tokenize = rule(name);
    md.inline.ruler.at(name, (state: StateInline, silent: boolean) => {
      const start = state.pos;
      const count = state.delimiters.length;
      const matched = tokenize(state, silent);
      if (matched && endingInlines.has(state.tokens) && startsWord(state.src, start)) {
        for (const delimiter of state.delimiters.slice(count)) wordStartMarkers.add(delimiter);
      }
      return matched;
    });
  }
  // After the openers and closers are paired, before the pairs become tags: an unpaired marker is a text token of its own.
  // Stryker disable next-line StringLiteral: a rule's name is only used to turn it on or off by name, which Easel never does
  md.inline.ruler2.after('balance_pairs', 'easel_unfinished_markers', (state: StateInline) => {
    if (!endingInlines.has(state.tokens)) return false;
    const drop = (delimiter: Delimiter) => {
      state.tokens[delimiter.token]!.content = '';
    };
    // A marker that can only open, starts a word and was paired with nothing, in the text or in a link's text.
    const lists = [state.delimiters, ...state.tokens_meta.map((meta) => meta?.delimiters ?? [])];
    for (const delimiters of lists) {
      for (const delimiter of delimiters) if (delimiter.open && !delimiter.close && delimiter.end === -1 && wordStartMarkers.has(delimiter)) drop(delimiter);
    }
    // The marker run the text ends with, which can neither open nor close (a space or nothing around it).
    let end = state.tokens.length;
    for (let index = state.delimiters.length - 1; index >= 0; index--) {
      const delimiter = state.delimiters[index]!;
      if (delimiter.token !== end - 1 || delimiter.close || delimiter.end !== -1) break;
      drop(delimiter);
      end = delimiter.token;
    }
    return false;
  });
}

/**
 * markdown-it ends every block tag with a newline; inside the bubble those would only be stray text nodes
 * (a reply's textContent would gain a newline per block). Any `<` in the output opens a real tag (text is
 * escaped), so this drops exactly those newlines, keeping the ones after `<br>` and inside code.
 */
function trimBlockNewlines(rendered: string): string {
  return rendered.replace(/(<\/?(?!br\b|code\b)[a-z][a-z0-9]*\b[^>]*>)\n/g, '$1');
}

const defaultRenderer = createMarkdownRenderer();

/** A whole reply (a reload, a reset message) as HTML. */
export function renderMarkdown(text: string, renderer: MarkdownRenderer = defaultRenderer): Html {
  return raw(trimBlockNewlines(renderer.render(text)));
}

/** What a streamed piece of a reply changes in the bubble. */
export type MarkdownStep =
  /** No block was finished: `text` is appended to the block in progress (shown as text). */
  | { kind: 'append'; text: string }
  /** Blocks were finished: `html` goes before the block in progress, which now holds `text` (its whole source). */
  | { kind: 'blocks'; html: string; text: string };

export interface MarkdownStream {
  push(chunk: string): MarkdownStep;
  /** The end of the reply: the block in progress, rendered ('' when there is none). */
  flush(): string;
}

// A line after which a new top-level block cannot belong to anything before it: not indented (a list
// item's continuation or indented code would be) and not a list item (it would continue a list above).
const LIST_ITEM = /^(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)/;
// What a list item's first characters can be before they are complete (`-`, `12`, `3.`).
const LIST_ITEM_PREFIX = /^(?:[-+*]|\d{1,9}[.)]?)$/;
const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})(.*)$/;
// A plain line that must come out as a paragraph of its own if the text before it is complete.
const PROBE = 'x';

/**
 * Splits a streamed reply into finished Markdown blocks, each rendered once, so the cost stays linear in
 * the reply's length: a block is finished at a blank line followed by a line at the margin that is not a
 * list item, outside a code fence. markdown-it confirms each split (the text before, with a plain line
 * after it, must end in that line as a paragraph of its own: no fence or list left open), so a split can
 * never change the HTML. The HTML of all blocks is exactly renderMarkdown of the whole reply.
 */
export function createMarkdownStream(renderer: MarkdownRenderer = defaultRenderer): MarkdownStream {
  /** The source of the blocks not finished yet, line ends normalised as markdown-it does. */
  let pending = '';
  /** Up to here `pending` was read line by line. */
  let scanned = 0;
  /** The line in progress: `pending` from `scanned` on. */
  let partial = '';
  let fence: { char: string; length: number } | undefined;
  let afterBlank = false;
  /** A carriage return at the end of a chunk: with a newline next, the two are one line end. */
  let heldReturn = false;
  /** After a refused split, the next check waits until `pending` doubled: refused checks cost O(n) in all. */
  let checkFrom = 0;

  function normalise(chunk: string): string {
    let text = (heldReturn ? '\r' : '') + chunk;
    heldReturn = text.endsWith('\r');
    if (heldReturn) text = text.slice(0, -1);
    return text.replace(/\r\n?/g, '\n');
  }

  /** The rendered blocks of `source` when they are complete on their own; undefined when they are not. */
  function renderIfComplete(source: string): string | undefined {
    const tokens = renderer.parse(`${source}${PROBE}`, {});
    const probe = tokens.slice(-3);
    // Stryker disable ConditionalExpression,LogicalOperator: one part made true, or two joined by ||: the probe is an x at the
    // margin after a blank line, its own paragraph at level 0 exactly when its last three tokens are these, so each part is implied by the others
    const own =
      probe.length === 3 &&
      probe[0]!.type === 'paragraph_open' &&
      probe[0]!.level === 0 &&
      probe[1]!.type === 'inline' &&
      probe[1]!.content === PROBE &&
      probe[2]!.type === 'paragraph_close';
    // Stryker restore ConditionalExpression,LogicalOperator
    return own ? trimBlockNewlines(renderer.renderer.render(tokens.slice(0, -3), renderer.options, {})) : undefined;
  }

  function updateFence(line: string): void {
    if (fence) {
      const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
      if (close && close[1]![0] === fence.char && close[1]!.length >= fence.length) fence = undefined;
      return;
    }
    const open = FENCE_OPEN.exec(line);
    // A backtick fence's info string holds no backtick (CommonMark 4.5).
    if (open && !(open[1]![0] === '`' && open[2]!.includes('`'))) fence = { char: open[1]![0]!, length: open[1]!.length };
  }

  /** Whether a new top-level block starts at `start`; the line may not be complete yet (undefined: too early to say). */
  function startsBlock(line: string, complete: boolean): boolean | undefined {
    if (!complete && (line === '' || LIST_ITEM_PREFIX.test(line))) return undefined;
    return /^\S/.test(line) && !LIST_ITEM.test(line);
  }

  /** Renders the text before `start` as finished blocks when markdown-it agrees they are. */
  function trySplit(start: number): string {
    // Stryker disable next-line EqualityOperator: cost only: a refused split waits for one more line before it is tried again
    if (start < checkFrom) return '';
    const rendered = renderIfComplete(pending.slice(0, start));
    if (rendered === undefined) {
      checkFrom = 2 * start;
      return '';
    }
    pending = pending.slice(start);
    // Stryker disable next-line AssignmentOperator: scanned is set again at every line's end, and a split needs a blank line (another line end) first
    scanned -= start;
    checkFrom = 0;
    return rendered;
  }

  return {
    push(chunk) {
      const text = normalise(chunk);
      // Only the new text is searched for line ends, never `pending`: searching a string built by
      // appending makes V8 flatten it, a copy of the whole block per chunk (quadratic in a long paragraph).
      let textStart = pending.length;
      pending += text;
      let html = '';
      let from = 0;
      let end: number;
      while ((end = text.indexOf('\n', from)) !== -1) {
        const line = partial + text.slice(from, end);
        partial = '';
        const start = scanned;
        scanned = textStart + end + 1;
        from = end + 1;
        if (fence) {
          updateFence(line);
          continue;
        }
        if (line.trim() === '') {
          afterBlank = true;
          continue;
        }
        if (afterBlank && startsBlock(line, true)) {
          const before = pending.length;
          html += trySplit(start);
          textStart -= before - pending.length;
        }
        afterBlank = false;
        updateFence(line);
      }
      partial += text.slice(from);
      // The line in progress may already show that a new block begins: the one before renders at once.
      if (afterBlank && !fence) {
        const starts = startsBlock(partial, false);
        if (starts !== undefined) {
          if (starts) html += trySplit(scanned);
          // Decided: the line is read again when complete, for fences, but not split at again.
          // Stryker disable next-line BooleanLiteral: the line is checked again when complete, with the same answer (its first characters decided it)
          afterBlank = false;
        }
      }
      return html === '' ? { kind: 'append', text } : { kind: 'blocks', html, text: pending };
    },

    flush() {
      if (heldReturn) pending += '\n';
      // Stryker disable BooleanLiteral,StringLiteral: the state left as it was: a stream ends at its flush, and a retry makes a new one
      heldReturn = false;
      const rest = pending;
      pending = '';
      scanned = 0;
      partial = '';
      fence = undefined;
      afterBlank = false;
      // Stryker restore BooleanLiteral,StringLiteral
      checkFrom = 0;
      // Stryker disable next-line ConditionalExpression,StringLiteral: renderMarkdown('') is ''
      return rest === '' ? '' : String(renderMarkdown(rest, renderer));
    },
  };
}
