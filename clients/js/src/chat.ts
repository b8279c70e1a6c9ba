// One chat, followed: its messages (history plus Realtime), sending with the reply as one stream
// of events across the handoff, following any reply (one this client did not send, or one
// found running after a reload), and the chat's control routes.

import { gone, HandoffError } from './errors.js';
import { type ReplyEvent, type ReplyStream, Inbox } from './events.js';
import { ChatFeed, type FeedOptions, type FeedStatus, type RealtimeHost } from './feed.js';
import type { Http } from './http.js';
import { type RespondBody, Routes } from './routes.js';
import { readSse } from './sse.js';
import { ChatState } from './state.js';
import {
  type ChatMessage,
  type Metadata,
  type MessageStatus,
  type NewMember,
  type PendingCascade,
  isEnded,
  isLive,
} from './types.js';

export interface SendOptions {
  /** The assistant to answer (none: the @-mentioned ones, else the chat's default). */
  assistantId?: string;
  multitaskStrategy?: 'reject' | 'interrupt' | 'enqueue' | 'steer';
  /** The client's own id for the message, to send it again without doubling it. */
  userMessageId?: string;
  /** A user message this one edits: answered again on a new branch. */
  editOf?: string;
  signal?: AbortSignal;
}

export interface ChatSnapshot {
  /** The active branches' messages; every branch's, stale ones marked, with `allBranches`. */
  messages: ChatMessage[];
  status: FeedStatus;
  /** Why the chat cannot be followed live (status `unavailable`), in the server's words. */
  unavailable: string | null;
  /** The cards of the chat's cascades that wait for the editor (`decideCascade`). */
  cascades: PendingCascade[];
}

function stateKey(message: ChatMessage): string {
  const { status, progress, pendingApproval, pendingQuestion } = message;
  return JSON.stringify([status, progress, pendingApproval, pendingQuestion]);
}

export class ChatSession {
  readonly chatId: string;
  readonly routes: Routes;
  private readonly state: ChatState;
  private readonly feed: ChatFeed;
  private readonly subscribers = new Set<() => void>();
  private snapshotCache: ChatSnapshot | null = null;

  constructor(http: Http, supabase: RealtimeHost, chatId: string, options: FeedOptions) {
    this.chatId = chatId;
    this.routes = new Routes(http);
    this.state = new ChatState(options.allBranches ?? false);
    this.feed = new ChatFeed(http, supabase, chatId, this.state, options);
    this.feed.listen({
      changed: () => this.notify(),
      status: () => this.notify(),
      loaded: () => this.notify(),
    });
  }

  /** Resolves once the chat's history is loaded (and the channel joined, when it can be). */
  ready(): Promise<void> {
    return this.feed.ready();
  }

  /** Stops following the chat. */
  close(): Promise<void> {
    return this.feed.close();
  }

  /** The messages as shown now, and the feed's status: the same object until something
   * changes (for React's useSyncExternalStore). */
  snapshot(): ChatSnapshot {
    this.snapshotCache ??= {
      messages: this.state.list(),
      status: this.feed.status,
      unavailable: this.feed.unavailable,
      cascades: [...this.state.cascades],
    };
    return this.snapshotCache;
  }

  /** A message held, shown or not (a replaced one is `stale`, out of `messages`). */
  message(id: string): ChatMessage | undefined {
    const message = this.state.get(id);
    return message && { ...message };
  }

  get messages(): ChatMessage[] {
    return this.snapshot().messages;
  }

  /** Called whenever a message or the feed's status changes; returns the unsubscribe. */
  subscribe(listener: () => void): () => void {
    this.subscribers.add(listener);
    return () => this.subscribers.delete(listener);
  }

  private notify(): void {
    this.snapshotCache = null;
    for (const listener of this.subscribers) listener();
  }

  /** The replies still being written (after a reload: the ones to `follow`). */
  async running(): Promise<ChatMessage[]> {
    await this.ready();
    return this.messages.filter((m) => m.role === 'assistant' && isLive(m.status));
  }

  /** Sends a message; its reply's events, from the first token to the end, across the handoff. */
  send(content: string, options: SendOptions = {}): ReplyStream {
    const body: RespondBody = {
      chatId: this.chatId,
      content,
      userMessageId: options.userMessageId ?? crypto.randomUUID(),
    };
    if (options.assistantId) body.assistantId = options.assistantId;
    if (options.multitaskStrategy) body.multitaskStrategy = options.multitaskStrategy;
    if (options.editOf) body.editOf = options.editOf;
    const open = () => this.routes.respond(body, options.signal);
    return this.stream(open, content, options.signal);
  }

  /** Answers `messageId` again on a new branch, streamed as `send` is. */
  regenerate(
    messageId: string,
    options: { assistantId?: string; multitaskStrategy?: 'reject' | 'interrupt'; signal?: AbortSignal } = {},
  ): ReplyStream {
    const open = () => this.routes.regenerate(this.chatId, messageId, options, options.signal);
    return this.stream(open, null, options.signal);
  }

  private async *stream(
    open: () => Promise<Response>,
    content: string | null,
    signal?: AbortSignal,
  ): ReplyStream {
    const response = await open();
    let metadata: Metadata | null = null;
    let text = '';
    try {
      for await (const { event, data } of readSse(response.body!)) {
        const d = (data ?? {}) as Record<string, any>;
        if (event === 'metadata') {
          metadata = d as Metadata;
          const user = this.state.get(metadata.userMessageId);
          this.state.begin(
            metadata.userMessageId,
            content ?? user?.content ?? '',
            metadata.assistantMessageId,
            metadata.assistantId,
          );
          this.notify();
          yield { type: 'metadata', metadata };
        } else if (!metadata) {
          continue;
        } else if (metadata.assistantMessageId === null) {
          // Posted to a shared chat only: stored once `metadata` said so; nobody answers.
          if (event === 'error') throw new HandoffError(0, String(d.code), String(d.message));
          if (event === 'done') break;
        } else if (event === 'token' && typeof d.text === 'string' && d.text) {
          text = this.state.token(metadata.assistantMessageId, d.text).text;
          this.notify();
          yield { type: 'text', messageId: metadata.assistantMessageId, text, delta: d.text };
        } else if (event === 'done' || event === 'error') {
          const id = (d.assistantMessageId as string) ?? metadata.assistantMessageId;
          const status: MessageStatus = event === 'done' ? 'completed' : 'error';
          const message = this.state.end(id, status, event === 'done' ? d.content : null);
          this.notify();
          if (message.text.length > text.length && message.text.startsWith(text)) {
            yield { type: 'text', messageId: id, text: message.text, delta: message.text.slice(text.length) };
          }
          const error = event === 'error' ? { code: String(d.code), message: String(d.message) } : undefined;
          yield { type: 'finish', messageId: id, message, ...(error ? { error } : {}) };
          return;
        } else if (event === 'handoff') {
          const id = (d.assistantMessageId as string) ?? metadata.assistantMessageId;
          if (d.status === 'queued') this.state.handedOff(id, 'queued');
          this.notify();
          yield { type: 'handoff', messageId: id, status: String(d.status), eventId: d.eventId };
          // A steered message's reply is the running one: its text is not this stream's.
          yield* this.follow(id, { signal, shown: id === metadata.assistantMessageId ? text : '' });
          return;
        }
        // Any other event (a newer server's) is not this version's to read: skipped.
      }
    } catch (error) {
      if (error instanceof HandoffError || signal?.aborted) throw error;
      // The stream was cut (the connection, the server): the reply may still go on.
    }
    if (!metadata) throw gone('the stream ended before it began');
    if (metadata.assistantMessageId === null) {
      const id = metadata.userMessageId;
      yield { type: 'posted', messageId: id, message: { ...this.state.get(id)! } };
      return;
    }
    // Ended without saying how: the stored reply says, if the server is still there.
    yield* this.follow(metadata.assistantMessageId, { signal, shown: text });
  }

  /** A reply's events from now to its end: its text (all of it so far first, then what is
   * added), its stored changes, its end. `shown`: text already shown, not yielded again. */
  async *follow(messageId: string, options: { signal?: AbortSignal; shown?: string } = {}): ReplyStream {
    const { signal } = options;
    let shown = options.shown ?? '';
    let key: string | null = null;
    const inbox = new Inbox<ChatMessage>();
    const stop = this.feed.listen({
      changed: (messages) => {
        const message = messages.find((m) => m.id === messageId);
        if (message) inbox.push(message);
      },
      gone: (error) => inbox.fail(error),
    });
    try {
      // What is held now; the feed's next history load brings every message again.
      const known = this.state.get(messageId);
      if (known) inbox.push(known);
      for (;;) {
        const message = { ...(await inbox.next(signal)) };
        for (const event of this.eventsOf(message, shown, key)) {
          if (event.type === 'text') shown = event.text;
          yield event;
        }
        key = stateKey(message);
        if (isEnded(message.status)) return;
      }
    } finally {
      stop();
    }
  }

  private *eventsOf(message: ChatMessage, shown: string, key: string | null): Generator<ReplyEvent> {
    const messageId = message.id;
    if (message.text !== shown && message.text.length >= shown.length) {
      const delta = message.text.startsWith(shown) ? message.text.slice(shown.length) : message.text;
      yield { type: 'text', messageId, text: message.text, delta };
    }
    if (isEnded(message.status)) yield { type: 'finish', messageId, message };
    else if (stateKey(message) !== key) yield { type: 'update', messageId, message };
  }

  // The chat's control routes (docs/conversation-control.md).
  cancel(assistantId?: string) {
    return this.routes.cancel(this.chatId, assistantId);
  }
  pause(assistantId?: string) {
    return this.routes.pause(this.chatId, assistantId);
  }
  resume(options: { instruction?: string; assistantId?: string } = {}) {
    return this.routes.resume(this.chatId, options);
  }
  approve(toolCallId: string, approved: boolean, note?: string) {
    return this.routes.approve(this.chatId, toolCallId, approved, note);
  }
  answer(questionId: string, answer: string) {
    return this.routes.answer(this.chatId, questionId, answer);
  }

  // Its people (docs/api.md#shared-chats).
  members() {
    return this.routes.members(this.chatId);
  }
  addMember(who: NewMember) {
    return this.routes.addMember(this.chatId, who);
  }
  removeMember(userId: string) {
    return this.routes.removeMember(this.chatId, userId);
  }

  /** Answers a cascade's card; the card leaves the snapshot, and the chat is watched for what
   * the cascade does next. */
  async decideCascade(cascadeId: string, approved: boolean) {
    const decided = await this.routes.decideCascade(this.chatId, cascadeId, approved);
    this.dropCard(cascadeId);
    return decided;
  }
  async cancelCascade(cascadeId: string) {
    const canceled = await this.routes.cancelCascade(this.chatId, cascadeId);
    this.dropCard(cascadeId);
    return canceled;
  }
  private dropCard(cascadeId: string): void {
    this.state.cascades = this.state.cascades.filter((card) => card.id !== cascadeId);
    this.notify();
    this.feed.watchCascades();
  }
}
