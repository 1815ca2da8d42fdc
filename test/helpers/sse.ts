// Reads a text/event-stream body into typed events, the way an API client would.
export interface SseEvent {
  type: string;
  data: Record<string, unknown>;
}

/** The frames of an event stream as sent: the event's name and its data lines joined (the page's are HTML). */
export async function* iterateSseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<{ event: string; data: string }> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = 'message';
  let data: string[] = [];
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline).replace(/\r$/, '');
      buffer = buffer.slice(newline + 1);
      if (line === '') {
        if (data.length > 0 || event !== 'message') yield { event, data: data.join('\n') };
        event = 'message';
        data = [];
      } else if (line.startsWith('event:')) event = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
  }
}

export async function* iterateSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  for await (const frame of iterateSseFrames(body)) {
    if (frame.data) yield { type: frame.event, data: JSON.parse(frame.data) as Record<string, unknown> };
  }
}

/** Every frame of a page stream, read to its end. */
export async function readSseFrames(response: Response): Promise<Array<{ event: string; data: string }>> {
  if (!response.body) throw new Error(`no body (status ${response.status})`);
  const frames: Array<{ event: string; data: string }> = [];
  for await (const frame of iterateSseFrames(response.body)) frames.push(frame);
  return frames;
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
