// The shapes the API answers and the package hands out (docs/api.md, docs/conversation-control.md).

export type MessageStatus =
  | 'queued'
  | 'streaming'
  | 'awaiting_approval'
  | 'awaiting_input'
  | 'paused'
  | 'completed'
  | 'error'
  | 'canceled';

/** A reply whose turn goes on: drafts may still come, a cancel still ends it. */
export const LIVE_REPLY_STATUSES: readonly MessageStatus[] = Object.freeze([
  'queued',
  'streaming',
  'awaiting_approval',
  'awaiting_input',
  'paused',
]);
/** A reply that stays as it is. */
export const ENDED_REPLY_STATUSES: readonly MessageStatus[] = Object.freeze([
  'completed',
  'error',
  'canceled',
]);

export const isLive = (status: string): boolean =>
  (LIVE_REPLY_STATUSES as readonly string[]).includes(status);
export const isEnded = (status: string): boolean =>
  (ENDED_REPLY_STATUSES as readonly string[]).includes(status);

export type MultitaskStrategy = 'reject' | 'interrupt' | 'enqueue' | 'steer';

export interface ToolProgress {
  id: string;
  name: string;
  status: string;
  note?: string;
  [key: string]: unknown;
}

export interface PendingApproval {
  toolCallId: string;
  name: string;
  args: unknown;
  /** The arguments with every hidden character escaped: show this, never `args`. */
  display: string;
  expiresAt?: string;
  [key: string]: unknown;
}

export interface PendingQuestion {
  questionId: string;
  question: string;
  options: string[];
  context?: string;
  expiresAt?: string;
  [key: string]: unknown;
}

/** One message of `GET /api/chat/{chatId}/history`. */
export interface HistoryMessage {
  id: string;
  assistantId: string;
  role: 'user' | 'assistant' | string;
  content: string;
  status: MessageStatus;
  createdAt: string;
  parentMessageId: string | null;
  checkpointId: string | null;
  branchId: string;
  stale: boolean;
  editOf: string | null;
  pendingApproval?: PendingApproval | null;
  pendingQuestion?: PendingQuestion | null;
  progress: ToolProgress[];
  draft?: { content: string; seq: number } | null;
  usage?: Record<string, unknown> | null;
}

export interface History {
  messages: HistoryMessage[];
  branchId: string;
}

/** A message as the package shows it: the stored fields, with `text` what a person should see
 * (a running reply's newest draft, an ended one's content). */
export interface ChatMessage {
  id: string;
  role: string;
  assistantId: string | null;
  status: MessageStatus;
  /** What to show: the newest text known, from the stream, a draft or the stored content. */
  text: string;
  /** The stored content (a running reply's is empty until it ends). */
  content: string;
  createdAt: string;
  parentMessageId: string | null;
  progress: ToolProgress[];
  pendingApproval: PendingApproval | null;
  pendingQuestion: PendingQuestion | null;
  usage: Record<string, unknown> | null;
  /** A user message sent with `steer`: the reply it joined. */
  steeredInto: string | null;
  /** The seq of the newest draft applied (-1: none). */
  draftSeq: number;
}

export interface Metadata {
  chatId: string;
  threadId: string;
  assistantId: string;
  userMessageId: string;
  assistantMessageId: string;
  runId: string;
  otherReplies?: { assistantId: string; assistantMessageId: string }[];
  strategy?: 'steer' | 'enqueue';
}

export interface Chat {
  id: string;
  title: string;
  [key: string]: unknown;
}

export interface Assistant {
  id: string;
  name: string;
  description: string;
}

export interface ChatAssistant extends Assistant {
  isDefault: boolean;
}

export interface Branch {
  id: string;
  forkedFrom: string | null;
  createdAt: string;
  latestMessage: unknown;
  active: boolean;
}

export interface Branches {
  branches: Branch[];
  activeBranchId: string;
}

/** A chat member (shared chats); the server's fields as it answers them. */
export interface Member {
  userId: string;
  [key: string]: unknown;
}
