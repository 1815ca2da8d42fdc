// What the vision model's tests start from: a conversation where the user asked for a cat in a wizard hat, the
// model wrote a prompt without the hat, and Generate made one picture of it (seed 77, 64×64).
import { scriptReply, type FakeOllama } from '../fakes/fake-ollama.ts';
import type { TestEasel } from './easel.ts';
import { replyMeta } from './replies.ts';
import { readSse } from './sse.ts';

export const CAT_REQUEST = 'a tabby cat in a blue wizard hat on old books';
export const CAT_PROMPT = 'a tabby cat on a stack of books';

export async function makePictureOfACat(fake: FakeOllama, easel: TestEasel): Promise<{ id: string; imageId: string }> {
  const id = await easel.newConversation();
  fake.enqueue(scriptReply('A cat it is.', replyMeta(CAT_PROMPT, { steps: 4 })));
  await readSse(await easel.post(`/api/conversations/${id}/messages`, { text: CAT_REQUEST }));
  const events = await readSse(await easel.post(`/api/conversations/${id}/generations`, { settings: { steps: 4, seed: 77, width: 64, height: 64 } }));
  const image = events.find((event) => event.type === 'image');
  if (!image) throw new Error(`no image: ${JSON.stringify(events)}`);
  return { id, imageId: String(image.data['id']) };
}
