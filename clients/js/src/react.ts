// useHandoffChat: a chat's messages, the reply being written, the feed's status and the control
// actions, for React (18+). In its own entry point (`@handoff/client/react`) so React stays
// optional. A page that mounts while a reply is being written shows it continuing: the chat's
// messages come from the history and Realtime, whoever sent the message. In a shared chat it
// holds the chat's people too, and the cards of an edit's cascade, with their actions.

import { useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react';

import type { ChatSession, ChatSnapshot, SendOptions } from './chat.js';
import type { HandoffClient } from './client.js';
import { HandoffError } from './errors.js';
import type { ReplyStream } from './events.js';
import { type ChatMessage, type Member, type NewMember, type PendingCascade, isLive } from './types.js';

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
  /** The chat's owner and members (null until loaded, or when they could not be). */
  members: Member[] | null;
  /** Adds an existing user (the owner's): the list follows. */
  addMember(who: NewMember): Promise<void>;
  /** Removes a member, or leaves (one's own id): the list follows. */
  removeMember(userId: string): Promise<void>;
  /** The cascades' cards that wait for the editor's decision. */
  cascades: PendingCascade[];
  decideCascade(cascadeId: string, approved: boolean): Promise<void>;
  cancelCascade(cascadeId: string): Promise<void>;
  /** The chat itself, for what the hook does not wrap. */
  chat: ChatSession;
}

const EMPTY: ChatSnapshot = { messages: [], status: 'connecting', unavailable: null, cascades: [] };

/** The chat's people, loaded on mount and again by `loadMembers`. */
function useMembers(chat: ChatSession, mounted: { current: boolean }) {
  const [members, setMembers] = useState<Member[] | null>(null);
  const loadMembers = useCallback(async () => {
    const listed = await chat.members();
    if (mounted.current) setMembers(listed);
  }, [chat, mounted]);
  useEffect(() => {
    setMembers(null);
    loadMembers().catch(() => {});
  }, [loadMembers]);
  return { members, loadMembers, setMembers };
}

type Controls = Pick<
  UseHandoffChat,
  'stop' | 'pause' | 'resume' | 'approve' | 'answer' | 'decideCascade' | 'cancelCascade'
>;

/** The chat's control actions, a refusal kept as the hook's `error`; `assistantId`: the running
 * reply's, whose turn stop, pause and resume act on. */
function controls(chat: ChatSession, act: (action: () => Promise<unknown>) => Promise<void>, assistantId?: string): Controls {
  return {
    stop: () => act(() => chat.cancel(assistantId)),
    pause: () => act(() => chat.pause(assistantId)),
    resume: (instruction) => act(() => chat.resume({ ...(instruction ? { instruction } : {}), ...(assistantId ? { assistantId } : {}) })),
    approve: (toolCallId, approved, note) => act(() => chat.approve(toolCallId, approved, note)),
    answer: (questionId, answer) => act(() => chat.answer(questionId, answer)),
    decideCascade: (cascadeId, approved) => act(() => chat.decideCascade(cascadeId, approved)),
    cancelCascade: (cascadeId) => act(() => chat.cancelCascade(cascadeId)),
  };
}

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
  const { members, loadMembers, setMembers } = useMembers(chat, mounted);

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
  const act = useCallback(async (action: () => Promise<unknown>) => {
    try {
      await action();
    } catch (failure) {
      if (failure instanceof HandoffError && mounted.current) setError(failure);
      else throw failure;
    }
  }, []);
  const assistantId = reply?.assistantId ?? undefined;
  return {
    messages: snapshot.messages,
    reply,
    status,
    feed: snapshot.status,
    error,
    send: (content, options) => run(chat.send(content, options)),
    regenerate: (messageId, options) => run(chat.regenerate(messageId, options)),
    ...controls(chat, act, assistantId),
    members,
    addMember: (who) => act(async () => (await chat.addMember(who), await loadMembers())),
    // One who left reads the chat no more: no list then.
    removeMember: (userId) =>
      act(() => chat.removeMember(userId).then(() => loadMembers().catch(() => mounted.current && setMembers(null)))),
    cascades: snapshot.cascades,
    chat,
  };
}
