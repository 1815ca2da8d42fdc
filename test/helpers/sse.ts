// Reads a text/event-stream body into typed events, the way an API client would.
export interface SseEvent {
  type: string;
  data: Record<string, unknown>;
}

export async function* iterateSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let type = 'message';
  let data = '';
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, '');
      buffer = buffer.slice(newline + 1);
      if (line === '') {
        if (data) yield { type, data: JSON.parse(data) as Record<string, unknown> };
        type = 'message';
        data = '';
      } else if (line.startsWith('event:')) type = line.slice(6).trim();
      else if (line.startsWith('data:')) data += line.slice(5).trimStart();
    }
  }
}

export async function readSse(response: Response): Promise<SseEvent[]> {
  if (!response.body) throw new Error(`no body (status ${response.status})`);
  const events: SseEvent[] = [];
  for await (const event of iterateSse(response.body)) events.push(event);
  return events;
}

/** The text a client shows: deltas appended, a retry clears the bubble. */
export function shownText(events: SseEvent[]): string {
  let text = '';
  for (const event of events) {
    if (event.type === 'retry') text = '';
    if (event.type === 'delta') text += String(event.data.text);
  }
  return text;
}

/**
 * The events' types with each run of `delta`s as one: a delta carries whatever text one read from Ollama
 * brought (docs/API.md), so how many there are depends on the network; their content and order do not.
 */
export function eventTypes(events: SseEvent[]): string[] {
  return events.map((event) => event.type).filter((type, index, types) => type !== 'delta' || types[index - 1] !== 'delta');
}
