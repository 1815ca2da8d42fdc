export { createComfyUiBackend, describeComfyUiError } from './comfyui-backend.ts';
export type { ComfyUiBackendOptions } from './comfyui-backend.ts';
export { DEFAULT_WORKFLOW_PATH, fillWorkflow, findCheckpointName, findSamplerSettings, loadDefaultWorkflow, loadWorkflow } from './workflow.ts';
export type { WorkflowErrorCode, WorkflowResult } from './workflow.ts';
