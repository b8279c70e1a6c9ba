// The open chat followed live through the package's feed (`client.feed`, every branch's
// history): the feed keeps the page's own model of the messages (conversation.js) up to date,
// and what it observes is shown here. The model keeps more than the package's would: what this
// page streams, decides and answers, and the stale messages something replaced.

import { watchCascades } from './cascades.js';
import {
  applyDraftTo,
  applyHistory,
  endedHere,
  isStreamingHere,
  shownStale,
  state,
  upsert,
} from './conversation.js';
import { ENDED_REPLY_STATUSES, LIVE_REPLY_STATUSES } from './statuses.js';
import { renderAll, rerender } from './messages.js';
import { aborted, setFeedState, showBanner } from './page.js';

function onMessageRow(row) {
  // Every assistant's messages: the chat is all of them, in the order they were written.
  if (row.role !== 'user' && row.role !== 'assistant') return null;
  const metadata = row.metadata || {};
  if (!shownStale(metadata.stale, metadata.replacedBy)) {
    state.messages.delete(row.id);
    return null;
  }
  const message = upsert(row.id, row.role);
  message.stale = Boolean(metadata.stale);
  message.replacedBy = metadata.replacedBy ?? null;
  message.cascade = metadata.cascade ?? null;
  message.senderId = row.sender_id ?? message.senderId;
  // A live row of a reply its stream saw end, or that was seen completed (which nothing
  // reopens), is older than that end (its insert, which the feed may bring after `done`): the
  // reply would step back to streaming, its text blank.
  if (endedHere(message) && LIVE_REPLY_STATUSES.includes(row.status)) return null;
  // The quick path's own stream is ahead of any stored row while it lasts.
  if (!isStreamingHere(message) || ENDED_REPLY_STATUSES.includes(row.status)) {
    message.content = row.content;
  }
  message.status = row.status;
  message.assistantId = row.assistant_id ?? message.assistantId;
  message.createdAt = row.created_at || message.createdAt;
  message.parentMessageId = row.parent_message_id;
  message.pendingApproval = metadata.pendingApproval ?? null;
  message.pendingQuestion = metadata.pendingQuestion ?? null;
  message.steeredInto = metadata.steeredInto ?? message.steeredInto;
  if (metadata.snapshot && Array.isArray(metadata.snapshot.progress)) {
    message.progress = metadata.snapshot.progress;
  }
  if (metadata.usage) message.usage = metadata.usage;
  message.local = false;
  return message;
}

function onDraftRow(row) {
  const message = state.messages.get(row.message_id);
  if (!message) {
    const earlierDraft = state.drafts.get(row.message_id);
    if (!earlierDraft || earlierDraft.seq < row.seq) state.drafts.set(row.message_id, row);
    return null;
  }
  return applyDraftTo(message, row) ? message : null;
}

// A draft of either transport (the whole text, or `text` after the draft of seq `after`), in
// the page's terms; 'gap' when drafts were missed: the feed loads the history again.
function onDraft(change) {
  const message = state.messages.get(change.messageId);
  const last = message ? message.draftSeq : -1;
  if (message && change.seq <= last) return null;
  let text = change.text;
  if (change.after !== null) {
    if (!message || message.draft === null || change.after !== last) return 'gap';
    text = message.draft + change.text;
  }
  const changed = onDraftRow({ message_id: change.messageId, seq: change.seq, draft_content: text });
  // A whole draft whose seq skips one: the message's rows may have been missed too.
  return last > 0 && change.seq > last + 1 ? 'gap' : changed;
}

// A row that says something replaced a message: an edit's cascade may follow, whose card the
// feed does not carry.
function replacing(row) {
  const replacedBy = row.metadata?.replacedBy;
  return Boolean(replacedBy) && state.messages.get(row.id)?.replacedBy !== replacedBy;
}

// The page's messages, as the package's feed keeps a model.
const model = {
  history: (rows, cascades) => applyHistory(rows, { pendingCascades: cascades }),
  row(row) {
    if (replacing(row)) watchCascades();
    const message = onMessageRow(row);
    // A message gone from the page (off every shown branch): the rest is laid out again.
    if (!message) renderAll();
    return message;
  },
  draft: onDraft,
  get: (id) => state.messages.get(id),
  list: () => [...state.messages.values()],
  get cascades() {
    return state.cascades;
  },
};

const STATUS_TEXT = {
  connecting: ['connecting', 'Connecting…'],
  live: ['live', 'Live'],
  down: ['down', 'Reconnecting…'],
  unavailable: ['down', 'No live updates'],
};

// What the feed observes, onto the page.
const view = {
  // One message live; after a history load, every one (laid out again once it is loaded).
  changed(messages) {
    if (messages.length === 1) rerender(messages[0]);
  },
  loaded: renderAll,
  status(status, detail) {
    setFeedState(...STATUS_TEXT[status]);
    if (status === 'live') showBanner('');
    if (status === 'unavailable') showBanner(`Live updates are off: ${detail}`);
  },
  failed(error) {
    if (!aborted(error)) showBanner(`Could not load this chat: ${error.message}`);
  },
};

// The chat followed live, its view this page: the package's feed, to `close` when leaving.
export function followChat(chatId) {
  const feed = state.client.feed(chatId, model, { allBranches: true });
  feed.listen(view);
  // Said before the page listened: the status it starts with.
  setFeedState(...STATUS_TEXT[feed.status]);
  return feed;
}
