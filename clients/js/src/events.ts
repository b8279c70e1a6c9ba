// The typed events of a reply, from its first token to its end, the same whether it was
// streamed here, handed off to the background, or joined after a reload.

import type { HandoffError } from './errors.js';
import type { ChatMessage, Metadata } from './types.js';

export type ReplyEvent =
  /** The respond stream's first event: the stored ids, who answers, the other addressees'
   * replies (follow them with `chat.follow(id)`). */
  | { type: 'metadata'; metadata: Metadata }
  /** The reply's text grew: `text` is all of it so far, `delta` what was added. */
  | { type: 'text'; messageId: string; text: string; delta: string }
  /** The reply goes on in the background (`status` queued, or steered: `messageId` is then
   * the running reply this message joined). */
  | { type: 'handoff'; messageId: string; status: string; eventId?: string }
  /** The reply's stored state changed: status, tool progress, a pending approval or question. */
  | { type: 'update'; messageId: string; message: ChatMessage }
  /** The message was posted to a shared chat only (it named no assistant): stored, answered
   * by nobody. The stream's last event; no reply follows. */
  | { type: 'posted'; messageId: string; message: ChatMessage }
  /** The reply ended (completed, canceled or error; `error`: what the stream said went wrong). */
  | {
      type: 'finish';
      messageId: string;
      message: ChatMessage;
      error?: { code: string; message: string };
    };

export type ReplyStream = AsyncGenerator<ReplyEvent, void, undefined>;

/** A queue an async generator waits on: pushed from callbacks, ended with an error or not. */
export class Inbox<T> {
  private items: T[] = [];
  private failure: HandoffError | null = null;
  private wake: (() => void) | null = null;

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  fail(error: HandoffError): void {
    this.failure = this.failure ?? error;
    this.wake?.();
  }

  /** The next item; throws the failure once the items before it are taken. */
  async next(signal?: AbortSignal): Promise<T> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) return item;
      if (this.failure) throw this.failure;
      if (signal?.aborted) throw signal.reason;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
      this.wake = null;
    }
  }
}
