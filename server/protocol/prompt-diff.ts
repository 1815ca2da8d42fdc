// A word-level diff of two prompts (a longest common subsequence of their words), for the page's highlight of
// a comparison and for the model's note of which prompt the user chose. Pure; prompts are at most 2000
// characters, so the table is at most about 1000 × 1000 words.

/** A run of one prompt's text: `changed` when its words are not in the other prompt at that place. */
export interface DiffPart {
  text: string;
  changed: boolean;
}

/** Each prompt cut into runs, the words the other lacks marked `changed`; each side's runs join to its text. */
export function diffPrompts(a: string, b: string): { a: DiffPart[]; b: DiffPart[] } {
  const tokensA = a.match(/\S+|\s+/g) ?? [];
  const tokensB = b.match(/\S+|\s+/g) ?? [];
  const wordsA = tokensA.flatMap((token, index) => (/\S/.test(token) ? [index] : []));
  const wordsB = tokensB.flatMap((token, index) => (/\S/.test(token) ? [index] : []));
  const n = wordsA.length;
  const m = wordsB.length;
  // lengths[i * (m + 1) + j]: the longest common run of wordsA[i…] and wordsB[j…].
  const lengths = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lengths[i * (m + 1) + j] =
        tokensA[wordsA[i]!] === tokensB[wordsB[j]!] ? lengths[(i + 1) * (m + 1) + j + 1]! + 1 : Math.max(lengths[(i + 1) * (m + 1) + j]!, lengths[i * (m + 1) + j + 1]!);
    }
  }
  const keptA = new Set<number>();
  const keptB = new Set<number>();
  for (let i = 0, j = 0; i < n && j < m; ) {
    if (tokensA[wordsA[i]!] === tokensB[wordsB[j]!]) {
      keptA.add(wordsA[i]!);
      keptB.add(wordsB[j]!);
      i++;
      j++;
    } else if (lengths[(i + 1) * (m + 1) + j]! >= lengths[i * (m + 1) + j + 1]!) i++;
    else j++;
  }
  return { a: toParts(tokensA, keptA), b: toParts(tokensB, keptB) };
}

/** The words of one side the other lacks, each run of them as one phrase. */
export function changedPhrases(parts: readonly DiffPart[]): string[] {
  return parts.filter((part) => part.changed).map((part) => part.text.trim());
}

function toParts(tokens: readonly string[], kept: ReadonlySet<number>): DiffPart[] {
  const isWord = (index: number) => /\S/.test(tokens[index] ?? '');
  const changedAt = (index: number) => isWord(index) && !kept.has(index);
  const parts: DiffPart[] = [];
  tokens.forEach((token, index) => {
    // Space between two changed words belongs to their run, so a phrase is marked whole.
    const changed = isWord(index) ? changedAt(index) : changedAt(index - 1) && changedAt(index + 1);
    const last = parts.at(-1);
    if (last && last.changed === changed) last.text += token;
    else parts.push({ text: token, changed });
  });
  return parts;
}
