export { createComfyUiBackend, describeComfyUiError } from './comfyui-backend.ts';
export type { ComfyUiBackendOptions } from './comfyui-backend.ts';
export {
  applyModelChoices,
  DEFAULT_IMG2IMG_WORKFLOW_PATH,
  DEFAULT_WORKFLOW_PATH,
  fillWorkflow,
  findCheckpointName,
  findChoiceNodes,
  findChoiceTarget,
  findOwnChoice,
  findSamplerSettings,
  loadDefaultWorkflow,
  loadWorkflow,
  MODEL_CHOICE_INPUTS,
  takesBatchSize,
} from './workflow.ts';
export type { ChoiceNode, ModelChoice, ModelChoiceResult, WorkflowErrorCode, WorkflowExtras, WorkflowKind, WorkflowResult } from './workflow.ts';
export { readComboOptions } from './object-info.ts';
