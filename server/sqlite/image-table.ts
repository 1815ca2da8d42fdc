// The images table and the checks kept with its pictures: a conversation's images, one by id, the gallery's
// pages of every conversation's (newest first, by the images_by_time index), and what the vision model found.
// Each write runs in one transaction; store.ts composes these with the other entities and guards the file.
import type Database from 'better-sqlite3';
import type { ConversationListing, ConversationStore, ImageFacets, ImageList, ImageListQuery } from '../core/conversation.ts';
import type { ImageRecord } from '../core/image-record.ts';
import { IMAGE_COLUMNS, toImage, toImageCheck, toImageRow, type ImageCheckRow, type ImageRow } from './rows.ts';

export type ImageTable = Pick<
  ConversationStore,
  'addImage' | 'listImages' | 'getImage' | 'listAllImages' | 'listImageFacets' | 'deleteImage' | 'addImageCheck' | 'listImageChecks'
> & {
  /** Inserts an imported conversation's image as it is (inside the import's transaction). */
  insertImage(image: ImageRecord): void;
  /** A conversation's images' ids and files: what goes with it when it is deleted. */
  listImageFiles(conversationId: string): Array<{ id: string; file: string }>;
};

export function createImageTable(db: Database.Database, conversations: { listWithImages(): ConversationListing[] }): ImageTable {
  const statements = {
    insertImage: db.prepare(`INSERT INTO images (${IMAGE_COLUMNS.join(', ')}) VALUES (${IMAGE_COLUMNS.map((column) => `@${column}`).join(', ')})`),
    // An image of a batch carries the batch's first moment: never move the conversation back in time (ISO strings
    // of one format compare as their moments do).
    touchNotBack: db.prepare('UPDATE conversations SET updated_at = MAX(updated_at, ?) WHERE id = ?'),
    listImages: db.prepare<[string], ImageRow>('SELECT * FROM images WHERE conversation_id = ? ORDER BY created_at, rowid'),
    listImageFiles: db.prepare<[string], { id: string; file: string }>('SELECT id, file FROM images WHERE conversation_id = ?'),
    getImage: db.prepare<[string], ImageRow>('SELECT * FROM images WHERE id = ?'),
    deleteImage: db.prepare('DELETE FROM images WHERE id = ?'),
    listImageModels: db.prepare<[], { model: string }>('SELECT DISTINCT model FROM images WHERE model IS NOT NULL ORDER BY model COLLATE NOCASE'),
    insertCheck: db.prepare<[string, string, string, string, string, string, string]>(
      'INSERT INTO image_checks (image_id, conversation_id, model, matches, misses, revised_prompt, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    getCheck: db.prepare<[number | bigint], ImageCheckRow>('SELECT * FROM image_checks WHERE id = ?'),
    listChecks: db.prepare<[string], ImageCheckRow>('SELECT * FROM image_checks WHERE conversation_id = ? ORDER BY id'),
  };

  // Case-insensitive containment, Unicode included (SQLite's LIKE and lower() fold ASCII only). The words come
  // joined by line breaks (they never hold one), and are folded the same way the prompt is.
  // Stryker disable next-line ObjectLiteral,BooleanLiteral: `deterministic` only lets SQLite plan around the function: the same rows
  db.function('easel_has_words', { deterministic: true }, (prompt: unknown, words: unknown) => {
    const text = foldText(String(prompt));
    return String(words).split('\n').every((word) => text.includes(foldText(word))) ? 1 : 0;
  });
  type SeqRow = ImageRow & { seq: number };
  const listStatements = new Map<string, Database.Statement<unknown[], SeqRow>>();
  /** One statement per combination of conditions, so each can use its index (a conversation's) instead of `? IS NULL OR …`. */
  function listStatement(query: ImageListQuery): { statement: Database.Statement<unknown[], SeqRow>; params: unknown[] } {
    const conditions: string[] = [];
    const params: unknown[] = [];
    if (query.conversationId !== undefined) {
      conditions.push('conversation_id = ?');
      params.push(query.conversationId);
    }
    if (query.model !== undefined) {
      conditions.push('model = ?');
      params.push(query.model);
    }
    if (query.before !== undefined) {
      conditions.push('(created_at, rowid) < (?, ?)');
      params.push(query.before.createdAt, query.before.seq);
    }
    // Stryker disable next-line ConditionalExpression,EqualityOperator: with no words the function is true for every row: the same rows
    if (query.words.length > 0) {
      conditions.push('easel_has_words(prompt, ?)');
      params.push(query.words.join('\n'));
    }
    const key = conditions.join(' AND ');
    let statement = listStatements.get(key);
    // Stryker disable next-line ConditionalExpression: prepared again, the same SQL gives the same rows: only CPU time changes
    if (!statement) {
      statement = db.prepare<unknown[], SeqRow>(`SELECT rowid AS seq, * FROM images${key === '' ? '' : ` WHERE ${key}`} ORDER BY created_at DESC, rowid DESC LIMIT ?`);
      listStatements.set(key, statement);
    }
    return { statement, params };
  }

  const addImage = db.transaction((image: ImageRecord) => {
    statements.insertImage.run(toImageRow(image));
    statements.touchNotBack.run(image.createdAt, image.conversationId);
  });

  const listAllImages = db.transaction((query: ImageListQuery): ImageList => {
    const { statement, params } = listStatement(query);
    // One more than asked: whether a next page exists, without counting.
    const rows = statement.all(...params, query.limit + 1);
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    return { images: page.map(toImage), next: rows.length > query.limit && last ? { createdAt: last.created_at, seq: last.seq } : null };
  });

  const listImageFacets = db.transaction((): ImageFacets => ({
    conversations: conversations.listWithImages(),
    models: statements.listImageModels.all().map((row) => row.model),
  }));

  const deleteImage = db.transaction((id: string): ImageRecord | undefined => {
    const row = statements.getImage.get(id);
    if (!row) return undefined;
    statements.deleteImage.run(id);
    return toImage(row);
  });

  const addImageCheck = db.transaction((check: Parameters<ConversationStore['addImageCheck']>[0]) => {
    const { lastInsertRowid } = statements.insertCheck.run(check.imageId, check.conversationId, check.model, JSON.stringify(check.matches), JSON.stringify(check.misses), check.revisedPrompt, check.createdAt);
    return toImageCheck(statements.getCheck.get(lastInsertRowid) as ImageCheckRow);
  });

  return {
    addImage,
    insertImage: (image) => void statements.insertImage.run(toImageRow(image)),
    listImages: (conversationId) => statements.listImages.all(conversationId).map(toImage),
    listImageFiles: (conversationId) => statements.listImageFiles.all(conversationId),
    getImage(id) {
      const row = statements.getImage.get(id);
      return row === undefined ? undefined : toImage(row);
    },
    listAllImages,
    listImageFacets,
    deleteImage,
    addImageCheck,
    listImageChecks: (conversationId) => statements.listChecks.all(conversationId).map(toImageCheck),
  };
}

/** How the gallery's search compares text: composed the same way, in lower case. */
function foldText(text: string): string {
  return text.normalize('NFKC').toLowerCase();
}
