// useHandoffChat: a chat's messages, the reply being written, the feed's status and the control
// actions, for React (18+). In its own entry point (`@handoff/client/react`) so React stays
// optional. A page that mounts while a reply is being written shows it continuing: the chat's
// messages come from the history and Realtime, whoever sent the message.

import { useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';

import type { ChatSession, ChatSnapshot, SendOptions } from './chat.js';
import type { HandoffClient } from './client.js';
import { HandoffError } from './errors.js';
import type { ReplyStream } from './events.js';
import { type ChatMessage, isLive } from './types.js';

export type ChatStatus = 'ready' | 'submitted' | 'streaming' | 'waiting' | 'error';

export interface UseHandoffChat {
  messages: ChatMessage[];
  /** The newest reply still running (streaming, in the background, waiting or paused). */
  reply: ChatMessage | null;
  /** `submitted`: sent, no reply yet; `streaming`: a reply is being written; `waiting`: a reply
   * waits on the user (approval, question) or is paused; `error`: the last send failed. */
  status: ChatStatus;
  /** The Realtime channel's state. */
  feed: ChatSnapshot['status'];
  error: HandoffError | null;
  send(content: string, options?: SendOptions): Promise<void>;
  regenerate(messageId: string, options?: { assistantId?: string }): Promise<void>;
  /** Cancels the running reply (its assistant's turn). */
  stop(): Promise<void>;
  pause(): Promise<void>;
  resume(instruction?: string): Promise<void>;
  approve(toolCallId: string, approved: boolean, note?: string): Promise<void>;
  answer(questionId: string, answer: string): Promise<void>;
  /** The chat itself, for what the hook does not wrap. */
  chat: ChatSession;
}

const EMPTY: ChatSnapshot = { messages: [], status: 'connecting' };

export function useHandoffChat(client: HandoffClient, chatId: string): UseHandoffChat {
  // The chat followed while mounted: closed on unmount, opened again on a remount (React's
  // strict mode mounts twice), a new chatId a new session.
  const [chat, setChat] = useState(() => client.chat(chatId));
  useEffect(() => {
    const session = client.chat(chatId);
    setChat(session);
    return () => void session.close();
  }, [client, chatId]);
  const snapshot = useSyncExternalStore(
    useCallback((listener: () => void) => chat.subscribe(listener), [chat]),
    () => chat.snapshot(),
    () => EMPTY,
  );
  const [submitted, setSubmitted] = useState(false);
  const [error, setError] = useState<HandoffError | null>(null);
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    return () => void (mounted.current = false);
  }, []);

  const run = useCallback(async (replies: ReplyStream) => {
    setError(null);
    setSubmitted(true);
    try {
      // The messages follow from the chat's state; the stream only needs reading to its end.
      for await (const event of replies) if (event.type !== 'metadata' && mounted.current) setSubmitted(false);
    } catch (failure) {
      const typed = failure instanceof HandoffError ? failure : new HandoffError(0, 'network', String(failure));
      if (mounted.current) setError(typed);
    } finally {
      if (mounted.current) setSubmitted(false);
    }
  }, []);

  const reply = useMemo(
    () => [...snapshot.messages].reverse().find((m) => m.role === 'assistant' && isLive(m.status)) ?? null,
    [snapshot.messages],
  );
  const waiting = reply && ['awaiting_approval', 'awaiting_input', 'paused'].includes(reply.status);
  const status: ChatStatus = submitted && !reply ? 'submitted' : reply ? (waiting ? 'waiting' : 'streaming') : error ? 'error' : 'ready';
  const act = useCallback(
    async (action: () => Promise<unknown>) => {
      try {
        await action();
      } catch (failure) {
        if (failure instanceof HandoffError && mounted.current) setError(failure);
        else throw failure;
      }
    },
    [],
  );
  const assistantId = reply?.assistantId ?? undefined;
  return {
    messages: snapshot.messages,
    reply,
    status,
    feed: snapshot.status,
    error,
    send: (content, options) => run(chat.send(content, options)),
    regenerate: (messageId, options) => run(chat.regenerate(messageId, options)),
    stop: () => act(() => chat.cancel(assistantId)),
    pause: () => act(() => chat.pause(assistantId)),
    resume: (instruction) => act(() => chat.resume({ ...(instruction ? { instruction } : {}), ...(assistantId ? { assistantId } : {}) })),
    approve: (toolCallId, approved, note) => act(() => chat.approve(toolCallId, approved, note)),
    answer: (questionId, answer) => act(() => chat.answer(questionId, answer)),
    chat,
  };
}
