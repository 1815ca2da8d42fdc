import { createFakeA1111, type FakeA1111 } from '../fakes/fake-a1111.ts';
import { createFakeOllama, type FakeOllama } from '../fakes/fake-ollama.ts';
import { startTestEasel, type TestEasel } from './easel.ts';

export interface PageStage {
  fake: FakeOllama;
  a1111: FakeA1111;
  easel: TestEasel;
  close(): Promise<void>;
}

/** What the page's route tests run against: the real server with the fake Ollama and a fake A1111 (5 ms a step). */
export async function startPageStage(): Promise<PageStage> {
  const fake = await createFakeOllama();
  const a1111 = await createFakeA1111({ stepDelayMs: 5 });
  const easel = await startTestEasel({ ollamaUrl: fake.url, flags: ['--image-backend', 'a1111', '--image-url', a1111.url] });
  return {
    fake,
    a1111,
    easel,
    async close() {
      await easel.close();
      await a1111.close();
      await fake.close();
    },
  };
}

/** A form post as the page's htmx sends it (same origin); `headers` adds htmx's own. */
export function sendForm(easel: TestEasel, method: string, path: string, fields: Record<string, string> | FormData = {}, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(easel.url + path, {
    method,
    headers: { 'sec-fetch-site': 'same-origin', ...headers },
    body: fields instanceof FormData ? fields : new URLSearchParams(fields),
  });
}
