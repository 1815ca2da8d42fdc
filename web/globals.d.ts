// For the type checker only (web/ has no build step). htmx is a global: its own <script> runs before the
// easel.js module. Its types, the request context (`event.detail.ctx`) and the typed htmx events on the
// document (`htmx:config:request` … `htmx:finally:request`) come from the htmx.org 4.0.1 package itself.
import type { Htmx } from 'htmx.org';

declare global {
  const htmx: Htmx;
}
