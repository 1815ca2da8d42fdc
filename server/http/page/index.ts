export { createPageRoutes, type PageDeps } from './routes.ts';
export { renderEventHtml, renderTurnStart, type StreamView } from './render-event.ts';
export { renderComposerStatus } from './views.ts';
