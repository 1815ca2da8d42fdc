import type { TestEasel } from './easel.ts';

/** A form post as the page's htmx sends it (same origin); `headers` adds htmx's own. */
export function sendForm(easel: TestEasel, method: string, path: string, fields: Record<string, string> | FormData = {}, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(easel.url + path, {
    method,
    headers: { 'sec-fetch-site': 'same-origin', ...headers },
    body: fields instanceof FormData ? fields : new URLSearchParams(fields),
  });
}
