// The conversation as bubbles: each message's text, label, tool-call chips, handoff indicator
// and actions, in the conversation's order.

import { renderApproval, renderPaused, renderQuestion } from './cards.js';
import { followCards, renderCascades } from './cascades.js';
import { noteSenders } from './members.js';
import { watchBranches } from './branches.js';
import { regenerate, updateControls } from './composer.js';
import {
  assistantName,
  awaitsAnswer,
  awaitsApproval,
  defaultAssistantId,
  isStreamingHere,
  pausingNow,
  senderName,
  shared,
  shownText,
  state,
} from './conversation.js';
import { $, els } from './page.js';
import { ENDED_REPLY_STATUSES, LIVE_REPLY_STATUSES } from './statuses.js';
import { renderTimeline, wireTimeline } from './timeline.js';

const STATUS_LABELS = {
  canceled: 'Canceled',
  error: 'Error',
  paused: 'Paused',
};

const CHIP_TEXT = {
  pending: 'running',
  approval: 'needs approval',
  completed: 'done',
  error: 'failed',
  stopped: 'stopped',
};

const nodeOf = (id) => els.messages.querySelector(`[data-message-id="${CSS.escape(id)}"]`);

// The server stores a message under its own id, derived from the one this page picked: the
// bubble shown at once takes it, or gives way to the stored row if the feed brought that first.
export function adoptStoredId(message, storedId) {
  if (!storedId || storedId === message.id) return;
  const pickedId = message.id;
  const keptUnderPickedId = state.messages.get(pickedId) === message;
  if (keptUnderPickedId && !state.messages.has(storedId)) {
    // In the bubble's place, before its reply should the feed have brought that first.
    state.messages = new Map(
      [...state.messages].map(([id, known]) => (id === pickedId ? [storedId, known] : [id, known])),
    );
  } else if (keptUnderPickedId) {
    state.messages.delete(pickedId);
  }
  nodeOf(pickedId)?.remove();
  if (state.messages.has(storedId) && state.messages.get(storedId) !== message) return;
  message.id = storedId;
  state.messages.set(storedId, message);
}

function chipStatus(call, message) {
  // A call still pending when its message ended never finished.
  let status = call.status;
  const ended = ENDED_REPLY_STATUSES.includes(message.status);
  if (status === 'pending' && ended) status = 'stopped';
  else if (status === 'pending' && message.pendingApproval?.toolCallId === call.id) {
    status = message.status === 'awaiting_approval' ? 'approval' : status;
  }
  return status;
}

function renderProgress(node, message) {
  const progress = message.progress || [];
  node.hidden = !progress.length;
  node.replaceChildren(
    ...progress.map((call) => {
      const status = chipStatus(call, message);
      const chip = document.createElement('li');
      chip.className = 'chip';
      chip.dataset.testid = 'progress-chip';
      chip.dataset.status = status;
      chip.dataset.toolCallId = call.id;
      const name = document.createElement('span');
      name.className = 'chip-name';
      name.textContent = call.name;
      const text = document.createElement('span');
      text.className = 'chip-status';
      text.textContent = CHIP_TEXT[status] || status;
      chip.append(name, text);
      // Said about the result: its output cut short, read as a preview, or stopped.
      if (call.note) {
        const note = document.createElement('span');
        note.className = 'chip-note';
        note.textContent = call.note;
        chip.append(note);
      }
      return chip;
    }),
  );
}

function labelOf(message, { streamingHere, approving, asking }) {
  if (message.stale) return message.role === 'user' ? 'Edited' : 'Stale';
  if (message.cascade === 'declined') return 'Kept as it was: the edit before it was not followed';
  if (message.role === 'assistant' && !streamingHere) {
    if (approving) return 'Waiting for your approval';
    if (asking) return 'Waiting for your answer';
    if (pausingNow(message)) return 'Pausing at its next step…';
    return STATUS_LABELS[message.status] || '';
  }
  if (message.role === 'user' && message.steeredInto) return 'Added to the reply above';
  return '';
}

// What replaced a stale message, as shown: the first shown one along its `replacedBy`s (a
// replacement replaced in turn, then hidden on an old branch, is passed over).
function replacementOf(message) {
  let id = message.replacedBy;
  for (let hops = 0; id && hops < 50; hops += 1) {
    const next = state.messages.get(id);
    if (!next) return null;
    if (!next.stale || !next.replacedBy) return next;
    id = next.replacedBy;
  }
  return null;
}

// Scrolls to a message and marks it for a moment, so the eye finds it.
export function highlight(id) {
  const node = nodeOf(id);
  if (!node) return;
  node.scrollIntoView({ block: 'center', behavior: 'smooth' });
  node.dataset.highlighted = 'true';
  clearTimeout(node.highlightTimer);
  node.highlightTimer = setTimeout(() => delete node.dataset.highlighted, 2500);
}

function renderReplaced(node, message) {
  const link = $('replaced-by', node);
  const replacement = message.stale ? replacementOf(message) : null;
  link.hidden = !replacement;
  link.dataset.target = replacement ? replacement.id : '';
  if (link.dataset.wired) return;
  link.dataset.wired = 'true';
  link.addEventListener('click', (event) => {
    event.preventDefault();
    if (link.dataset.target) highlight(link.dataset.target);
  });
}

function renderSender(node, message) {
  const sender = $('message-sender', node);
  sender.hidden = message.role !== 'user' || !shared();
  sender.textContent = sender.hidden ? '' : senderName(message.senderId);
}

function renderActions(node, message) {
  const actions = $('message-actions', node);
  actions.hidden =
    message.stale ||
    message.role !== 'assistant' ||
    !ENDED_REPLY_STATUSES.includes(message.status) ||
    isStreamingHere(message);
  if (actions.hidden || actions.dataset.wired) return;
  actions.dataset.wired = 'true';
  $('regenerate', actions).addEventListener('click', () => {
    const current = state.messages.get(node.dataset.messageId);
    if (current) regenerate(current);
  });
}

export function renderMessage(message) {
  let node = nodeOf(message.id);
  if (!node) {
    node = els.messageTemplate.content.firstElementChild.cloneNode(true);
    node.dataset.messageId = message.id;
    wireTimeline(node);
    els.messages.insertBefore(node, nodeAfter(message.id));
  }
  const streamingHere = isStreamingHere(message);
  const status = streamingHere ? 'streaming' : message.status;
  const approving = awaitsApproval(message);
  const asking = awaitsAnswer(message);
  const askingUser = approving || asking;
  // A reply at work: live, not paused, and not waiting on this page's user.
  const working = (shown) =>
    LIVE_REPLY_STATUSES.includes(shown) && shown !== 'paused' && !askingUser;
  const background = !streamingHere && working(message.status);
  node.dataset.role = message.role;
  node.dataset.status = status;
  node.dataset.stale = String(message.stale);
  node.dataset.phase = streamingHere ? 'quick' : background ? 'background' : message.status;
  node.className = `message message-${message.role} status-${status}${message.stale ? ' stale' : ''}`;
  const bubble = node.querySelector('.bubble');
  // Screen readers wait for the finished text instead of reading every token.
  bubble.setAttribute('aria-busy', String(working(status)));

  const text = shownText(message);
  const textNode = $('message-text', node);
  if (textNode.textContent !== text) textNode.textContent = text;

  // Which assistant wrote the reply (before its row says, the one it was sent to).
  const author = $('message-assistant', node);
  author.hidden = message.role !== 'assistant';
  const authorId = message.assistantId ?? defaultAssistantId();
  author.textContent = author.hidden ? '' : assistantName(authorId);
  const label = $('message-label', node);
  const labelText = labelOf(message, { streamingHere, approving, asking });
  label.hidden = !labelText;
  label.textContent = labelText;
  renderSender(node, message);
  renderReplaced(node, message);

  renderProgress($('progress', node), message);
  const indicator = $('handoff-indicator', node);
  indicator.hidden = !background;
  // An enqueued message's reply has not begun: it waits for the one ahead of it.
  indicator.querySelector('.handoff-text').textContent =
    message.status === 'queued' && !text
      ? 'Queued: starts when the reply before it ends…'
      : 'Continuing in the background…';
  renderApproval(bubble, message);
  renderQuestion(bubble, message);
  renderPaused(bubble, message);
  renderActions(node, message);
  renderTimeline(node, message);
}

// The node of the first message after `id`, in the conversation's order, that is shown already:
// a bubble that gets its node late (a message that took its stored id while its reply
// streamed) goes before it, not after its own reply.
function nodeAfter(id) {
  let after = false;
  for (const key of state.messages.keys()) {
    if (after) {
      const node = nodeOf(key);
      if (node) return node;
    } else if (key === id) {
      after = true;
    }
  }
  return null;
}

export function renderAll() {
  const ids = new Set(state.messages.keys());
  for (const node of [...els.messages.children]) {
    if (!ids.has(node.dataset.messageId)) node.remove();
  }
  for (const message of state.messages.values()) renderMessage(message);
  // Keep DOM order equal to the map's order.
  for (const message of state.messages.values()) els.messages.append(nodeOf(message.id));
  afterRender();
}

export function afterRender() {
  els.empty.hidden = state.messages.size > 0;
  renderCascades();
  if (state.cascades.length) followCards();
  noteSenders();
  updateControls();
  watchBranches();
  if (state.stickToBottom) els.messages.scrollTop = els.messages.scrollHeight;
}

export function rerender(message) {
  renderMessage(message);
  afterRender();
}
