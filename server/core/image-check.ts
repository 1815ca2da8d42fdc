import type { Critique } from '../protocol/index.ts';

/**
 * What the vision model found when it checked a picture against what was asked (Check): what it shows, what is
 * missing or wrong and the prompt it proposes. Kept with the picture (a reload shows it), gone with it.
 */
export interface ImageCheck extends Critique {
  id: number;
  imageId: string;
  conversationId: string;
  /** The vision model that looked, as Ollama names it. */
  model: string;
  createdAt: string;
}
