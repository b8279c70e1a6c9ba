// What a client holds of one chat: its messages as shown, and how a stored row (Realtime), a
// draft (a `message_draft` row or a `draft` broadcast), the history and this client's own
// respond stream change them. Each source may be behind another; the rules keep the newest:
// drafts only move forward by seq, a reply that ended never steps back to running, and a reply
// this client streams shows the longest text any source has (drafts and the stream are
// prefixes of the same growing text). A message that goes off the active branch (replaced by an
// edit, a regeneration, a cascade) is kept, `stale`, but left out of the list shown.

import {
  type ChatMessage,
  type HistoryMessage,
  type MessageStatus,
  type PendingCascade,
  isEnded,
  isLive,
} from './types.js';

interface Held extends ChatMessage {
  streamed: string | null;
  draft: string | null;
}

/** A Realtime change of `public.message` (snake_case, as Postgres has it). */
export interface MessageRow {
  id: string;
  role: string;
  content: string;
  status: MessageStatus;
  assistant_id?: string | null;
  sender_id?: string | null;
  created_at?: string;
  parent_message_id?: string | null;
  metadata?: Record<string, any> | null;
}

/** A draft, from either transport: `after` null is the whole text; else `text` continues the
 * draft of seq `after` (broadcast). */
export interface DraftChange {
  messageId: string;
  seq: number;
  after: number | null;
  text: string;
}

function blank(id: string, role: string): Held {
  return {
    id,
    role,
    assistantId: null,
    status: role === 'assistant' ? 'streaming' : 'completed',
    text: '',
    content: '',
    createdAt: new Date().toISOString(),
    parentMessageId: null,
    progress: [],
    pendingApproval: null,
    pendingQuestion: null,
    usage: null,
    steeredInto: null,
    draftSeq: -1,
    senderId: null,
    stale: false,
    replacedBy: null,
    cascade: null,
    streamed: null,
    draft: null,
  };
}

function shown(message: Held): string {
  if (!isLive(message.status)) return message.content;
  let text = message.content;
  for (const candidate of [message.draft, message.streamed]) {
    if (candidate !== null && candidate.length >= text.length) text = candidate;
  }
  return text;
}

export class ChatState {
  private held = new Map<string, Held>();
  // Whole drafts that came before their message's row.
  private early = new Map<string, DraftChange>();
  /** The cards of the chat's cascades that wait for the editor, as the last history had them. */
  cascades: PendingCascade[] = [];

  /** `withStale`: `list` shows the stale messages too (every branch's history is followed). */
  constructor(private readonly withStale = false) {}

  get(id: string): ChatMessage | undefined {
    return this.held.get(id);
  }

  /** The messages shown, in the chat's order (a copy each, safe to keep): stale ones left out,
   * unless made `withStale`. */
  list(): ChatMessage[] {
    return [...this.held.values()]
      .filter((message) => this.withStale || !message.stale)
      .map(({ streamed: _s, draft: _d, ...message }) => ({ ...message }));
  }

  private upsert(id: string, role: string): Held {
    let message = this.held.get(id);
    if (!message) {
      message = blank(id, role);
      this.held.set(id, message);
      const early = this.early.get(id);
      this.early.delete(id);
      if (early) this.draft(early);
    }
    return message;
  }

  private settle(message: Held): Held {
    message.text = shown(message);
    return message;
  }

  /** The history in place of what is held, keeping what it is behind on: newer drafts, the
   * text this client streams, an end this client saw. */
  history(rows: HistoryMessage[], cascades: PendingCascade[] = []): void {
    const previous = this.held;
    this.held = new Map();
    this.cascades = cascades;
    for (const row of rows) {
      if (row.role !== 'user' && row.role !== 'assistant') continue;
      const known = previous.get(row.id);
      const message = blank(row.id, row.role);
      Object.assign(message, {
        assistantId: row.assistantId || null,
        senderId: row.senderId ?? null,
        stale: row.stale,
        replacedBy: row.replacedBy ?? null,
        cascade: row.cascade ?? null,
        content: row.content,
        status: row.status,
        createdAt: row.createdAt,
        parentMessageId: row.parentMessageId,
        pendingApproval: row.pendingApproval ?? null,
        pendingQuestion: row.pendingQuestion ?? null,
        progress: row.progress ?? [],
        usage: row.usage ?? null,
      });
      if (known) {
        message.streamed = known.streamed;
        message.steeredInto = known.steeredInto;
        if (known.draftSeq > (row.draft?.seq ?? -1)) {
          message.draft = known.draft;
          message.draftSeq = known.draftSeq;
        }
        if (isEnded(known.status) && isLive(row.status)) {
          Object.assign(message, { status: known.status, content: known.content });
        }
      }
      if (row.draft && row.draft.seq > message.draftSeq) {
        message.draft = row.draft.content;
        message.draftSeq = row.draft.seq;
      }
      this.held.set(row.id, this.settle(message));
    }
    // Messages of a turn in flight that the history does not have yet stay, at the end; so do
    // replaced ones (off the active branch, which the history leaves out), still stale.
    for (const [id, message] of previous) {
      if (!this.held.has(id) && (message.streamed !== null || message.stale)) this.held.set(id, message);
    }
  }

  /** A stored row: the message it changed, or null when it changed nothing shown. */
  row(row: MessageRow): ChatMessage | null {
    if (row.role !== 'user' && row.role !== 'assistant') return null;
    const metadata = row.metadata ?? {};
    const message = this.upsert(row.id, row.role);
    // An ended reply never steps back: a live row of it is older than its end.
    if (isEnded(message.status) && isLive(row.status)) return null;
    message.stale = Boolean(metadata.stale);
    message.replacedBy = metadata.replacedBy ?? message.replacedBy;
    message.cascade = metadata.cascade ?? message.cascade;
    message.senderId = row.sender_id ?? message.senderId;
    message.content = row.content;
    message.status = row.status;
    // A message posted to a shared chat only is stored with an empty assistant.
    message.assistantId = row.assistant_id === undefined ? message.assistantId : row.assistant_id || null;
    message.createdAt = row.created_at ?? message.createdAt;
    message.parentMessageId = row.parent_message_id ?? message.parentMessageId;
    message.pendingApproval = metadata.pendingApproval ?? null;
    message.pendingQuestion = metadata.pendingQuestion ?? null;
    message.steeredInto = metadata.steeredInto ?? message.steeredInto;
    if (Array.isArray(metadata.snapshot?.progress)) message.progress = metadata.snapshot.progress;
    if (metadata.usage) message.usage = metadata.usage;
    return this.settle(message);
  }

  /** A draft: the message it moved on, null when it was old news, or 'gap' when it continues
   * a draft this client never saw (the history has the whole text). */
  draft(change: DraftChange): ChatMessage | null | 'gap' {
    const message = this.held.get(change.messageId);
    if (!message) {
      if (change.after !== null) return 'gap';
      const earlier = this.early.get(change.messageId);
      if (!earlier || earlier.seq < change.seq) this.early.set(change.messageId, change);
      return null;
    }
    if (change.seq <= message.draftSeq) return null;
    if (change.after === null) message.draft = change.text;
    else if (change.after === message.draftSeq && message.draft !== null) message.draft += change.text;
    else return 'gap';
    message.draftSeq = change.seq;
    return this.settle(message);
  }

  /** The seq of the newest draft held for a message (-1: none). */
  draftSeq(id: string): number {
    return this.held.get(id)?.draftSeq ?? -1;
  }

  /** This client's message and reply, as its respond stream's `metadata` names them (no
   * reply: a message posted to a shared chat only). */
  begin(userMessageId: string, content: string, replyId: string | null, assistantId: string | null): void {
    const user = this.upsert(userMessageId, 'user');
    if (!user.content) this.settle(Object.assign(user, { content, assistantId }));
    if (replyId === null) return;
    const reply = this.upsert(replyId, 'assistant');
    reply.assistantId = reply.assistantId ?? assistantId;
    reply.streamed = reply.streamed ?? '';
    this.settle(reply);
  }

  /** A token of this client's stream. */
  token(replyId: string, text: string): ChatMessage {
    const reply = this.upsert(replyId, 'assistant');
    reply.streamed = (reply.streamed ?? '') + text;
    return this.settle(reply);
  }

  /** The end the stream said (`done`, `error`): stored before it was said. */
  end(replyId: string, status: MessageStatus, content: string | null): ChatMessage {
    const reply = this.upsert(replyId, 'assistant');
    reply.status = status;
    reply.content = content ?? reply.streamed ?? reply.content;
    return this.settle(reply);
  }

  /** The reply went on in the background (`handoff`). */
  handedOff(replyId: string, status: MessageStatus): ChatMessage {
    const reply = this.upsert(replyId, 'assistant');
    if (!isEnded(reply.status)) reply.status = status;
    return this.settle(reply);
  }
}
