// --comfy-img2img-workflow: the ComfyUI workflow Vary runs, from the flag (its name holds a digit) or the environment.
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../server/config/index.ts';

describe('--comfy-img2img-workflow', () => {
  it('is read from the flag, in both spellings, and from EASEL_COMFY_IMG2IMG_WORKFLOW; absent by default', () => {
    const read = (argv: string[], env: Record<string, string> = {}) => {
      const parsed = parseConfig(argv, env);
      if (!parsed.ok || parsed.value === null) throw new Error(JSON.stringify(parsed));
      return parsed.value.comfyImg2imgWorkflow;
    };
    expect(read(['--comfy-img2img-workflow', '/w/vary.json'])).toBe('/w/vary.json');
    expect(read(['--comfy-img2img-workflow=/w/vary.json'])).toBe('/w/vary.json');
    expect(read([], { EASEL_COMFY_IMG2IMG_WORKFLOW: '/w/env.json' })).toBe('/w/env.json');
    expect(read([])).toBeUndefined();
  });
});
