// The family of the checkpoint that paints: read from real checkpoint names, and what it changes in the
// prompt the model is asked for and in the metadata it sends.
import { describe, expect, it } from 'vitest';
import {
  buildSystemPrompt,
  detectFamily,
  FAMILY_STYLES,
  fitMetadataToFamily,
  fitSizeToFamily,
  resolveFamily,
  SYSTEM_PROMPT,
  type Metadata,
} from '../../../server/protocol/index.ts';

describe('detectFamily reads the names checkpoints are shipped with', () => {
  it.each([
    ['v1-5-pruned-emaonly.safetensors [6ce0161689]', 'sd15'],
    ['dreamshaper_8 sd15.safetensors', 'sd15'],
    ['v2-1_768-ema-pruned.safetensors', 'sd2'],
    ['sd_xl_base_1.0.safetensors', 'sdxl'],
    ['juggernautXL_v9.safetensors', 'sdxl'],
    ['SDXL/realvisxlV40.safetensors', 'sdxl'],
    ['ponyDiffusionV6XL_v6StartWithThisOne.safetensors', 'pony'],
    ['Pony/autismmixSDXL_autismmixPony.safetensors', 'pony'],
    ['illustriousXL_v01.safetensors', 'illustrious'],
    ['noobaiXLNAIXL_vPred10Version.safetensors', 'illustrious'],
    ['flux1-dev-fp8.safetensors', 'flux'],
    ['FLUX.1-schnell', 'flux'],
    ['sd3.5_large.safetensors', 'sd3'],
    ['sd3_medium_incl_clips.safetensors', 'sd3'],
    ['stable-diffusion-3-medium', 'sd3'],
    ['animagineXLV31.safetensors', 'sdxl'],
    ['v2-1_512-ema-pruned.ckpt', 'sd2'],
    ['768-v-ema.ckpt', 'sd2'],
    ['sd2.1-base.safetensors', 'sd2'],
  ])('%s → %s', (name, family) => {
    expect(detectFamily(name)).toBe(family);
  });

  it('says nothing for a name that tells no family, or none at all', () => {
    expect(detectFamily('dreamshaper_8.safetensors')).toBeNull();
    // A fine-tune's own version is not SD 2's: these are SD 1.5 models.
    expect(detectFamily('realisticVisionV20_v20.safetensors')).toBeNull();
    expect(detectFamily('ghostmix_v20Bakedvae.safetensors')).toBeNull();
    expect(detectFamily('cyberrealistic_v21.safetensors')).toBeNull();
    expect(detectFamily('sd-cpp-local')).toBeNull();
    expect(detectFamily('')).toBeNull();
    expect(detectFamily(null)).toBeNull();
  });

  it('the user choice wins over the name, and SD 1.5 is assumed only when nothing says', () => {
    expect(resolveFamily('flux', 'sd_xl_base_1.0.safetensors')).toMatchObject({ style: { id: 'flux' }, source: 'setting' });
    expect(resolveFamily(null, 'sd_xl_base_1.0.safetensors')).toMatchObject({ style: { id: 'sdxl' }, source: 'checkpoint' });
    expect(resolveFamily(null, 'model.safetensors')).toMatchObject({ style: { id: 'sd15' }, source: 'fallback' });
  });
});

describe('the system prompt names the family and its style', () => {
  it('without a family it is the prompt for any image model', () => {
    expect(buildSystemPrompt()).toBe(SYSTEM_PROMPT);
    expect(SYSTEM_PROMPT).not.toContain('THE IMAGE MODEL');
  });

  it('SDXL: tags within CLIP’s 75 tokens, with an example in tags', () => {
    const prompt = buildSystemPrompt(FAMILY_STYLES.sdxl);
    expect(prompt).toContain('THE IMAGE MODEL is SDXL');
    expect(prompt).toContain('Comma-separated tags');
    expect(prompt).toContain('about 75 tokens');
    expect(prompt).toContain(FAMILY_STYLES.sdxl.example);
    expect(prompt).not.toContain('ignores negative prompts');
  });

  it('Pony: its score tags first, then booru tags', () => {
    const prompt = buildSystemPrompt(FAMILY_STYLES.pony);
    expect(prompt).toContain('"score_9, score_8_up, score_7_up"');
    expect(prompt).toContain('Danbooru-style tags');
  });

  it('Flux: sentences, no negative prompt, CFG 1', () => {
    const prompt = buildSystemPrompt(FAMILY_STYLES.flux);
    expect(prompt).toContain('plain, descriptive sentences');
    expect(prompt).toContain('ignores negative prompts');
    expect(prompt).toContain('keep cfg at 1');
    expect(prompt).not.toContain('Comma-separated tags');
  });
});

const metadata = (over: Partial<Metadata> = {}): Metadata => ({ prompt: 'a red fox, snow.', generate_image: true, steps: 20, cfg: 7, seed: -1, ...over });

describe('fitMetadataToFamily: the metadata made right for the family', () => {
  it('puts forgotten quality tags first, once', () => {
    expect(fitMetadataToFamily(metadata({ prompt: 'cat, wizard hat' }), FAMILY_STYLES.pony).prompt).toBe('score_9, score_8_up, score_7_up, cat, wizard hat');
    expect(fitMetadataToFamily(metadata({ prompt: 'score_9, score_8_up, score_7_up, cat' }), FAMILY_STYLES.pony).prompt).toBe('score_9, score_8_up, score_7_up, cat');
    expect(fitMetadataToFamily(metadata({ prompt: 'masterpiece, best quality, cat' }), FAMILY_STYLES.illustrious).prompt).toBe('masterpiece, best quality, cat');
  });

  it('leaves an empty prompt empty (the model is still asking)', () => {
    expect(fitMetadataToFamily(metadata({ prompt: '' }), FAMILY_STYLES.pony).prompt).toBe('');
  });

  it('drops a tag list’s full stop, keeps a sentence’s', () => {
    expect(fitMetadataToFamily(metadata(), FAMILY_STYLES.sdxl).prompt).toBe('a red fox, snow');
    expect(fitMetadataToFamily(metadata({ prompt: 'A red fox in the snow.' }), FAMILY_STYLES.flux).prompt).toBe('A red fox in the snow.');
  });

  it('Flux: CFG at 1 and no negative prompt; SDXL keeps both', () => {
    const flux = fitMetadataToFamily(metadata({ negative_prompt: 'blurry' }), FAMILY_STYLES.flux);
    expect(flux.cfg).toBe(1);
    expect(flux).not.toHaveProperty('negative_prompt');
    const sdxl = fitMetadataToFamily(metadata({ negative_prompt: 'blurry' }), FAMILY_STYLES.sdxl);
    expect(sdxl).toMatchObject({ cfg: 7, negative_prompt: 'blurry' });
  });
});

describe('fitSizeToFamily keeps the orientation', () => {
  it('an SD 1.5 portrait becomes SDXL’s nearest portrait bucket; a square its square', () => {
    expect(fitSizeToFamily({ width: 512, height: 768 }, FAMILY_STYLES.sdxl)).toEqual({ width: 832, height: 1216 });
    expect(fitSizeToFamily({ width: 768, height: 512 }, FAMILY_STYLES.sdxl)).toEqual({ width: 1216, height: 832 });
    expect(fitSizeToFamily({ width: 512, height: 512 }, FAMILY_STYLES.flux)).toEqual({ width: 1024, height: 1024 });
    expect(fitSizeToFamily({ width: 1216, height: 832 }, FAMILY_STYLES.sd15)).toEqual({ width: 768, height: 512 });
  });

  it('every bucket is a size the settings accept', () => {
    for (const style of Object.values(FAMILY_STYLES)) {
      for (const { width, height } of style.buckets) {
        expect(width % 8).toBe(0);
        expect(height % 8).toBe(0);
      }
    }
  });
});
