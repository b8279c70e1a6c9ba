// A transport for AI SDK's useChat (`ai` 5+, `@ai-sdk/react`): an app that uses useChat switches
// to Handoff by passing `transport: new HandoffChatTransport(client)`. Sending answers the last
// user message's text through respond (regenerate through …/regenerate), and a reload finds the
// reply still being written and streams it again from its beginning (`resumeStreamIsReplay`),
// with no Redis: the reply's drafts are in Postgres. The assistant message takes the id the
// server stored the reply under; its state (status, tool progress, a pending approval or
// question) arrives as a `data-handoff` part, replaced as it changes.

import type { ChatTransport, UIMessage, UIMessageChunk } from 'ai';

import type { HandoffClient } from './client.js';
import type { ReplyStream } from './events.js';
import type { ChatMessage } from './types.js';

/** The `data-handoff` part's value. */
export interface HandoffPartData {
  status: string;
  progress: ChatMessage['progress'];
  pendingApproval: ChatMessage['pendingApproval'];
  pendingQuestion: ChatMessage['pendingQuestion'];
}

export interface HandoffTransportOptions {
  /** The assistant to answer (none: the @-mentioned ones, else the chat's default). */
  assistantId?: string;
  multitaskStrategy?: 'reject' | 'interrupt' | 'enqueue' | 'steer';
}

function textOf(message: UIMessage | undefined): string {
  if (!message) return '';
  return message.parts
    .map((part) => (part.type === 'text' ? part.text : ''))
    .join('');
}

function partOf(message: ChatMessage): UIMessageChunk {
  const data: HandoffPartData = {
    status: message.status,
    progress: message.progress,
    pendingApproval: message.pendingApproval,
    pendingQuestion: message.pendingQuestion,
  };
  return { type: 'data-handoff', id: 'handoff', data } as UIMessageChunk;
}

/** A reply's events as UI message chunks, from `start` to `finish`. */
function chunks(replies: ReplyStream, knownId?: string): ReadableStream<UIMessageChunk> {
  let started = false;
  let textOpen = false;
  const TEXT = 'text';
  const begin = (id: string, controller: ReadableStreamDefaultController<UIMessageChunk>) => {
    if (started) return;
    started = true;
    controller.enqueue({ type: 'start', messageId: id });
  };
  const stream = new ReadableStream<UIMessageChunk>({
    // Reads events until one gives a chunk: a pull that enqueues nothing is not called again.
    async pull(controller) {
      const before = controller.desiredSize;
      try {
        while (controller.desiredSize === before) {
          if (await step(controller)) return;
        }
      } catch (error) {
        controller.error(error);
      }
    },
    async cancel() {
      await replies.return(undefined);
    },
  });

  return stream;

  /** One event's chunks; true once the stream is closed. */
  async function step(controller: ReadableStreamDefaultController<UIMessageChunk>): Promise<boolean> {
    const { value: event, done } = await replies.next();
    if (done) {
      controller.close();
      return true;
    }
    if (event.type === 'posted') {
      // Posted to a shared chat only: no reply, so no assistant message.
      controller.close();
      return true;
    }
    if (event.type === 'metadata') {
      if (event.metadata.assistantMessageId) begin(event.metadata.assistantMessageId, controller);
      return false;
    }
    begin(knownId ?? event.messageId, controller);
    if (event.type === 'text' && event.delta) {
      if (!textOpen) controller.enqueue({ type: 'text-start', id: TEXT });
      textOpen = true;
      controller.enqueue({ type: 'text-delta', id: TEXT, delta: event.delta });
    } else if (event.type === 'update' || event.type === 'finish') {
      controller.enqueue(partOf(event.message));
    }
    if (event.type === 'finish') {
      if (textOpen) controller.enqueue({ type: 'text-end', id: TEXT });
      if (event.error) controller.enqueue({ type: 'error', errorText: event.error.message });
      controller.enqueue({ type: 'finish' });
      controller.close();
      return true;
    }
    return false;
  }
}

export class HandoffChatTransport<UI_MESSAGE extends UIMessage = UIMessage>
  implements ChatTransport<UI_MESSAGE>
{
  /** A reconnect streams the reply from its beginning: what was written, then what follows. */
  readonly resumeStreamIsReplay = true;

  constructor(
    private readonly client: HandoffClient,
    private readonly options: HandoffTransportOptions = {},
  ) {}

  async sendMessages(options: Parameters<ChatTransport<UI_MESSAGE>['sendMessages']>[0]) {
    const chat = this.client.chat(options.chatId);
    const signal = options.abortSignal;
    if (options.trigger === 'regenerate-message') {
      const target = options.messageId ?? options.messages.findLast((m) => m.role === 'assistant')?.id;
      if (!target) throw new Error('Nothing to regenerate: the chat has no reply.');
      const regenerate = { ...(this.options.assistantId ? { assistantId: this.options.assistantId } : {}) };
      return chunks(chat.regenerate(target, { ...regenerate, ...(signal ? { signal } : {}) }));
    }
    const last = options.messages.findLast((m) => m.role === 'user');
    return chunks(chat.send(textOf(last), { ...this.options, ...(signal ? { signal } : {}) }));
  }

  async reconnectToStream(options: { chatId: string; abortSignal?: AbortSignal }) {
    const chat = this.client.chat(options.chatId);
    const [running] = await chat.running();
    if (!running) return null;
    const signal = options.abortSignal;
    return chunks(chat.follow(running.id, signal ? { signal } : {}), running.id);
  }

  close(): void {
    void this.client.close();
  }
}
