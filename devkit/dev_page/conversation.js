// What the page holds of the open chat: its messages as shown (the server's fields, and what
// this page streamed, decided and answered), and how a stored row, a draft or the history
// changes them. No DOM here.

import { ENDED_REPLY_STATUSES, LIVE_REPLY_STATUSES } from './statuses.js';

export const state = {
  // The dev server's session (protocol/session.js), and the package's client it made: the
  // routes.
  connection: null,
  client: null,
  session: null,
  chats: [],
  chatId: null,
  // This chat's live feed (the package's, on the page's model: live.js).
  feed: null,
  // This chat's messages, in display order, by id.
  messages: new Map(),
  // Drafts that arrived before their message row.
  drafts: new Map(),
  // Turns this page sent whose SSE stream is still open (the quick path), and whether a
  // message is on its way.
  turns: new Set(),
  sending: false,
  generation: 0,
  // The replies' timelines this page opened, by message id.
  timelines: new Map(),
  // The deployment's assistants (GET /api/assistants), and the open chat's, each with
  // `isDefault`.
  assistants: [],
  chatAssistants: [],
  // The open chat's members (GET /api/chats/{id}/members), by user id, and the caller's role
  // in it (`owner` or `member`).
  members: new Map(),
  role: null,
  // The edit's cascade cards waiting for a decision (the history's `pendingCascades`).
  cascades: [],
  stickToBottom: true,
};

// What this page asked of the server and is waiting to see in the rows.
export const controls = {
  // The reply a pause was asked for, until its row says `paused` (or it ends).
  pausing: null,
  regenerating: false,
  // The chat the user is leaving (removing themself from): its branches are not asked for.
  leaving: null,
  // The branches shown in the switcher, and what they were loaded for.
  branchesKey: '',
  branchesTimer: null,
  branchesRequest: 0,
  activeBranchId: null,
};

// A message as shown: server fields plus what this page streamed.
function blankMessage(id, role) {
  return {
    id,
    role,
    // A reply's assistant; a user message's, the one it was addressed to (null: not known yet).
    assistantId: null,
    // Who sent a user message (null: a reply, or this page's user before the row says).
    senderId: null,
    // Off its assistant's active branch, and what replaced it (an edit, a regenerated reply).
    stale: false,
    replacedBy: null,
    // A reply an edit's cascade left as it was: `declined`.
    cascade: null,
    content: '',
    // An assistant message this page learns of before its row is one being written.
    status: role === 'assistant' ? 'streaming' : 'completed',
    createdAt: new Date().toISOString(),
    parentMessageId: null,
    pendingApproval: null,
    // The model's question (status awaiting_input): questionId, question, options, context.
    pendingQuestion: null,
    progress: [],
    // The turn's token usage (`metadata.usage`: each model call, and their sum).
    usage: null,
    draft: null,
    draftSeq: -1,
    decided: new Set(),
    // Questions this page answered (the row says awaiting_input until the job reads it).
    answered: new Set(),
    // A user message sent with `steer`: the reply it joined.
    steeredInto: null,
    // A reply whose own stream said it ended (`done`, `error`): stored before it was said.
    endedOnStream: false,
    local: false,
  };
}

export function upsert(id, role) {
  let message = state.messages.get(id);
  if (!message) {
    message = blankMessage(id, role);
    state.messages.set(id, message);
  }
  const draft = state.drafts.get(id);
  if (draft) {
    state.drafts.delete(id);
    applyDraftTo(message, draft);
  }
  return message;
}

// The text the user should see: a running reply shows its newest draft (the whole text so far),
// an ended one its content, which the server set from the final state or, on cancel, from the
// last draft.
export function shownText(message) {
  if (LIVE_REPLY_STATUSES.includes(message.status) && message.draft !== null) {
    return message.draft.length >= message.content.length ? message.draft : message.content;
  }
  return message.content;
}

export function applyDraftTo(message, draft) {
  if (draft.seq <= message.draftSeq) return false;
  message.draftSeq = draft.seq;
  message.draft = draft.draft_content;
  return true;
}

// Whether the page saw the reply end for good: its own stream said so, or it was seen
// `completed`, which nothing reopens (a failed job's replay may reopen an `error`).
export function endedHere(message) {
  return message.endedOnStream || message.status === 'completed';
}

export function isStreamingHere(message) {
  for (const turn of state.turns) {
    if (turn.streaming && turn.assistantMessageId === message.id) return true;
  }
  return false;
}

export function activeReply() {
  for (const message of [...state.messages.values()].reverse()) {
    const live = LIVE_REPLY_STATUSES.includes(message.status) && !message.stale;
    if (message.role === 'assistant' && live) return message;
  }
  return null;
}

export function awaitsApproval(message) {
  const pending = message.pendingApproval;
  return (
    message.status === 'awaiting_approval' &&
    Boolean(pending) &&
    !message.decided.has(pending.toolCallId)
  );
}

export function awaitsAnswer(message) {
  const pending = message.pendingQuestion;
  return (
    message.status === 'awaiting_input' &&
    Boolean(pending) &&
    !message.answered.has(pending.questionId)
  );
}

export function pausingNow(message) {
  return (
    controls.pausing === message.id &&
    message.status !== 'paused' &&
    !ENDED_REPLY_STATUSES.includes(message.status)
  );
}

function fromHistory(row) {
  const message = blankMessage(row.id, row.role);
  Object.assign(message, {
    assistantId: row.assistantId ?? null,
    senderId: row.senderId ?? null,
    stale: Boolean(row.stale),
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
  return message;
}

// A message off its active branch is shown only when something replaced it: a stale reply
// (or edited message) with a link to its replacement. The rest of an old branch stays hidden,
// as the branch switcher shows it.
export const shownStale = (stale, replacedBy) => !stale || Boolean(replacedBy);

// The stored history (every branch's) in place of the messages shown, keeping what only this
// page knows; and the cascade cards waiting for a decision.
export function applyHistory(rows, body = {}) {
  state.cascades = body.pendingCascades ?? [];
  const previous = state.messages;
  state.messages = new Map();
  for (const row of rows) {
    if (!shownStale(row.stale, row.replacedBy)) continue;
    if (row.role !== 'user' && row.role !== 'assistant') continue;
    const message = fromHistory(row);
    const known = previous.get(row.id);
    if (known) {
      // Keep what this page already holds that history does not carry.
      message.draft = known.draft;
      message.draftSeq = known.draftSeq;
      message.decided = known.decided;
      message.answered = known.answered;
      message.steeredInto = known.steeredInto;
      message.local = known.local;
      message.endedOnStream = known.endedOnStream;
      if (isStreamingHere(known)) message.content = known.content;
      // A history read before the reply's end was stored, brought after its stream said it
      // ended or the feed showed it completed: the reply would step back to streaming.
      if (endedHere(known) && LIVE_REPLY_STATUSES.includes(message.status)) {
        message.status = known.status;
        message.content = known.content;
      }
    }
    // A reply still in the background comes with its latest draft; the feed's are newer.
    if (row.draft) applyDraftTo(message, { seq: row.draft.seq, draft_content: row.draft.content });
    state.messages.set(row.id, message);
  }
  // Bubbles of the turn in flight that the server has not stored yet stay at the end.
  for (const [id, message] of previous) {
    if (!state.messages.has(id) && message.local) state.messages.set(id, message);
  }
}

// The chat's assistant named `id`, else the deployment's; its name, or the id when neither has it
// (one the code no longer defines).
export function assistantName(id) {
  const known = [...state.chatAssistants, ...state.assistants].find((a) => a.id === id);
  return known ? known.name : id;
}

// Who sent a user message, as the page names them: "You" for this page's user, a member's
// e-mail, else the start of their id (someone who left before the members were read).
export function senderName(senderId) {
  if (!senderId || senderId === state.session?.userId) return 'You';
  return state.members.get(senderId)?.email ?? `${senderId.slice(0, 8)}…`;
}

// Whether the chat has, or had, anyone besides this page's user: only then are senders named.
export function shared() {
  if (state.members.size > 1) return true;
  for (const message of state.messages.values()) {
    if (message.senderId && message.senderId !== state.session?.userId) return true;
  }
  return false;
}

// The assistant that answers what names none: the chat's default.
export function defaultAssistantId() {
  return state.chatAssistants.find((a) => a.isDefault)?.id ?? state.session?.assistantId ?? null;
}
