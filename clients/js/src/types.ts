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
  /** A reply's assistant; a user message's first addressee (null: posted to a shared chat
   * only, answered by nobody). */
  assistantId: string | null;
  role: 'user' | 'assistant' | string;
  /** Who sent a user message, the chat's owner or a member (null on replies). */
  senderId?: string | null;
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
  /** What replaced this message: an edit's message, a regenerated reply. */
  replacedBy?: string | null;
  /** `declined`: a reply an edit's cascade left as it was, the editor having declined. */
  cascade?: string | null;
}

/** A cascade's card: `remaining` replies still depend on the edit of `editedMessageId` (by
 * `replacementId`); answer it with `decideCascade` (docs/conversation-control.md). */
export interface PendingCascade {
  id: string;
  editedMessageId: string;
  replacementId: string;
  regenerated: number;
  remaining: number;
}

export interface History {
  messages: HistoryMessage[];
  branchId: string;
  /** The chat's cascades waiting for the editor's decision, oldest first. */
  pendingCascades?: PendingCascade[];
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
  /** Who sent a user message (a shared chat's owner or a member); null on replies and before
   * the stored row is known. */
  senderId: string | null;
  /** Off the active branch: replaced (by an edit, a regeneration, a cascade). Such a message is
   * left out of the chat's `messages`; `chat.message(id)` still has it. */
  stale: boolean;
  /** The message that replaced this one, if any. */
  replacedBy: string | null;
  /** `declined`: an edit's cascade left this reply as it was. */
  cascade: string | null;
}

/** The respond stream's first event. `assistantId` and `assistantMessageId` are null for a
 * message posted to a shared chat only (it named no assistant): no reply follows. */
export interface Metadata {
  chatId: string;
  threadId?: string;
  assistantId: string | null;
  userMessageId: string;
  assistantMessageId: string | null;
  runId?: string;
  otherReplies?: { assistantId: string; assistantMessageId: string }[];
  strategy?: 'steer' | 'enqueue';
}

/** The caller's part in a chat: its owner, or a member of a shared chat. */
export type ChatRole = 'owner' | 'member';

export interface Chat {
  id: string;
  title: string;
  createdAt: string;
  updatedAt: string;
  role: ChatRole;
}

export interface Assistant {
  id: string;
  name: string;
  description: string;
  /** Conversation starters: messages a page offers to begin with. */
  starters: string[];
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

/** One person of a shared chat (`GET /api/chats/{chatId}/members`). */
export interface Member {
  userId: string;
  email: string | null;
  role: ChatRole;
  /** When they joined; for the owner, the chat's creation. */
  addedAt: string;
}

/** Whom to add to a chat: an existing user, by id or by e-mail (matched in any case). */
export type NewMember = { userId: string; email?: never } | { email: string; userId?: never };

export interface CascadeDecision {
  cascadeId: string;
  approved: boolean;
}
