// ComfyUI's /object_info: what each node class takes. Line numbers cite ComfyUI 0.3.64 (a125cd84).
import { isRecord } from '../util/index.ts';

/**
 * The names a combo input of `classType` takes, from GET /object_info/{classType}'s answer; undefined when the
 * answer does not describe the class (ComfyUI answers `{}` for a class it does not have, server.py:639-645).
 *
 * The answer is `{ [classType]: { input: { required: { [name]: spec }, optional: {…} }, … } }` (server.py:592-625,
 * node_info). A combo's spec comes in two shapes, and both are read:
 * - `[[name, …], {…options}]` (or `[[name, …]]`): the list itself as the type, as the classic nodes write it
 *   (nodes.py:564 CheckpointLoaderSimple's ckpt_name, 1508-1509 KSampler's sampler_name and scheduler), and
 *   the only shape 0.3.64 checks a prompt against (execution.py:896-920);
 * - `["COMBO", {"options": [name, …], …}]`: the newer form nodes written with comfy_api write
 *   (comfy_api/latest/_io.py:333-374 Combo.Input.as_dict, 1180-1185 add_to_dict_v1), which
 *   comfy/comfy_types/node_typing.py:168-173 asks nodes to prefer, and which newer ComfyUI checks too
 *   (Comfy-Org/ComfyUI PR #11345).
 * An input that is no combo (a STRING, say), or that the class lacks, gives []: it has no list to offer.
 */
export function readComboOptions(answer: unknown, classType: string, input: string): string[] | undefined {
  const info = isRecord(answer) ? answer[classType] : undefined;
  if (!isRecord(info) || !isRecord(info['input'])) return undefined;
  const inputs = info['input'];
  const spec = [inputs['required'], inputs['optional']].map((group) => (isRecord(group) ? group[input] : undefined)).find((found) => found !== undefined);
  if (!Array.isArray(spec)) return [];
  const [type, options] = spec as unknown[];
  const names = Array.isArray(type) ? type : type === 'COMBO' && isRecord(options) && Array.isArray(options['options']) ? options['options'] : [];
  return names.filter((name): name is string => typeof name === 'string');
}
