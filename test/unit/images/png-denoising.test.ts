// "Denoising strength" in A1111's parameters text: written by formatA1111Parameters where create_infotext puts it,
// read back, and added to a server's own text that lacks it (sd.cpp's), wherever its parameters line ends.
import { describe, expect, it } from 'vitest';
import { addDenoisingStrength, formatA1111Parameters, parseA1111Parameters } from '../../../server/png/index.ts';

describe('Denoising strength', () => {
  it('is written after the model and before Version, as Python prints a float, and read back', () => {
    const text = formatA1111Parameters({ prompt: 'a fox', negativePrompt: '', steps: 20, seed: 1, width: 64, height: 64, model: 'sd15', denoisingStrength: 1, version: 'Easel 1' });
    expect(text).toBe('a fox\nSteps: 20, Seed: 1, Size: 64x64, Model: sd15, Denoising strength: 1.0, Version: Easel 1');
    expect(parseA1111Parameters(text).denoisingStrength).toBe(1);
    expect(parseA1111Parameters('a fox\nSteps: 20, Seed: 1, Size: 64x64').denoisingStrength).toBeUndefined();
  });

  it('is added before Version, at the end of a line without one, on a line of its own after prompt text only; never twice', () => {
    expect(addDenoisingStrength('a fox\nSteps: 20, Seed: 1, Version: stable-diffusion.cpp, SDCPP: {"Version: x":1}', 0.35)).toBe(
      'a fox\nSteps: 20, Seed: 1, Denoising strength: 0.35, Version: stable-diffusion.cpp, SDCPP: {"Version: x":1}',
    );
    expect(addDenoisingStrength('a fox\nSteps: 20, Seed: 1, Size: 8x8', 0.65)).toBe('a fox\nSteps: 20, Seed: 1, Size: 8x8, Denoising strength: 0.65');
    expect(addDenoisingStrength('Version: x, Steps: 20, Seed: 1', 0.5)).toBe('Denoising strength: 0.5, Version: x, Steps: 20, Seed: 1');
    expect(addDenoisingStrength('just a prompt', 0.5)).toBe('just a prompt\nDenoising strength: 0.5');
    const own = 'a fox\nSteps: 20, Seed: 1, Size: 8x8, Denoising strength: 0.35, Version: v1.10.1';
    expect(addDenoisingStrength(own, 0.35)).toBe(own);
  });
});
