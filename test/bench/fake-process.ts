// The fake Ollama in its own process for the bench, so neither the server's nor the direct client's
// measurements share a thread with it. The bench drives it over IPC (see FakeCommand).
import { createFakeOllama } from '../fakes/fake-ollama.ts';
import { floodChunks, pacedChunks, proseChunks } from './replies.ts';

export type FakeCommand =
  | { id: number; type: 'flood'; tokens: number }
  | { id: number; type: 'paced'; tokens: number; delayMs: number }
  | { id: number; type: 'prose'; turns: number; chars: number; flood: boolean }
  | { id: number; type: 'sent' }
  | { id: number; type: 'state' };

export type FakeAnswer =
  | { id: number; ok: true; sentNs?: number[]; pending?: number; scriptErrors?: string[] }
  | { id: number; ok: false; error: string };

const fake = await createFakeOllama({ waitTimeoutMs: 600_000 });
/** process.hrtime (CLOCK_MONOTONIC, shared by every process on the machine) at which each paced line left. */
let sentNs: number[] = [];

process.on('message', (raw) => {
  const command = raw as FakeCommand;
  try {
    switch (command.type) {
      case 'flood':
        fake.enqueue({ chunks: floodChunks(command.tokens), flood: true });
        break;
      case 'paced': {
        const sent: number[] = [];
        sentNs = sent;
        fake.enqueue({ chunks: pacedChunks(command.tokens), delayMs: command.delayMs, onLineWritten: (line) => line < command.tokens && sent.push(Number(process.hrtime.bigint())) });
        break;
      }
      case 'prose':
        for (let turn = 0; turn < command.turns; turn++) {
          const chunks = proseChunks(command.chars, turn);
          fake.enqueue(command.flood ? { chunks, flood: true } : { chunks });
        }
        break;
      case 'sent':
        process.send?.({ id: command.id, ok: true, sentNs } satisfies FakeAnswer);
        return;
      case 'state':
        process.send?.({ id: command.id, ok: true, pending: fake.pendingReplies, scriptErrors: [...fake.scriptErrors] } satisfies FakeAnswer);
        return;
    }
    process.send?.({ id: command.id, ok: true } satisfies FakeAnswer);
  } catch (error) {
    process.send?.({ id: command.id, ok: false, error: String(error) } satisfies FakeAnswer);
  }
});
process.on('disconnect', () => void fake.close().then(() => process.exit(0)));
process.send?.({ url: fake.url });
