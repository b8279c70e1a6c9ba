// Sending a message and streaming its reply (the quick path's SSE stream into the reply's
// bubble; the replies of the other assistants it mentions, shown as they start), and the chat's
// controls: cancel, pause, regenerate.

import { readSse } from './client/index.js';
import { pickedAssistantId } from './assistants.js';
import {
  activeReply,
  controls,
  defaultAssistantId,
  pausingNow,
  state,
  upsert,
} from './conversation.js';
import { adoptStoredId, renderAll, renderMessage, rerender } from './messages.js';
import { aborted, els, showComposerError } from './page.js';

// A message's id, made here so that sending it again does not double it. (crypto.randomUUID
// needs a secure context; getRandomValues does not: the page on a LAN address.)
function uuid4() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export async function send() {
  const content = els.input.value;
  if (!content.trim() || !state.chatId || state.sending) return;
  showComposerError('');
  const chatId = state.chatId;
  const generation = state.generation;
  // None picked: the chat's default answers, or the assistants the message @-mentions.
  const assistantId = pickedAssistantId();
  const userMessage = upsert(uuid4(), 'user');
  const senderId = state.session.userId;
  Object.assign(userMessage, { content, status: 'completed', local: true, assistantId, senderId });
  const controller = new AbortController();
  state.sending = true;
  els.input.value = '';
  state.stickToBottom = true;
  rerender(userMessage);

  const current = () => generation === state.generation;
  const refused = (text) => {
    if (!current()) return;
    state.sending = false;
    state.messages.delete(userMessage.id);
    // The typed text goes back unless something new was typed meanwhile.
    if (!els.input.value) els.input.value = content;
    showComposerError(text);
    renderAll();
  };

  const body = {
    chatId,
    content,
    userMessageId: userMessage.id,
    multitaskStrategy: els.strategy.value,
    ...(assistantId ? { assistantId } : {}),
  };
  let response;
  try {
    // (Nothing is stored on a 401: the client renews the token once and sends it again.)
    response = await state.client.respond(body, controller.signal);
  } catch (error) {
    if (aborted(error)) return;
    refused(
      error.status === 0
        ? 'Not sent: the server cannot be reached. Your message is still in the box.'
        : `Not sent: ${error.message}`,
    );
    return;
  }
  if (!current()) {
    controller.abort();
    return;
  }
  // Accepted: another message may follow now (its strategy decides what happens to this one).
  state.sending = false;
  await streamReply(response, { controller, current, userMessage, assistantId });
}

// The replies a message that mentions several assistants started besides the streamed one:
// each runs in the background, and shows now, before its row arrives.
function showOtherReplies(data) {
  for (const other of data.otherReplies ?? []) {
    const known = state.messages.has(other.assistantMessageId);
    const reply = upsert(other.assistantMessageId, 'assistant');
    if (!known) Object.assign(reply, { status: 'queued', local: true });
    reply.assistantId = other.assistantId;
    reply.parentMessageId = data.userMessageId;
    rerender(reply);
  }
}

// The turn's `metadata` event: the user message under its stored id, and the reply it opens
// (none for a message steered into the running reply).
function onMetadata(turn, data, userMessage) {
  if (userMessage) {
    adoptStoredId(userMessage, data.userMessageId);
    userMessage.assistantId = data.assistantId ?? turn.assistantId ?? userMessage.assistantId;
  }
  // (under its stored id, in its place)
  const stored = state.messages.get(data.userMessageId);
  if (stored) renderMessage(stored);
  if (data.strategy === 'steer') {
    // Joined the reply that runs: no reply of its own; that one answers it too.
    if (userMessage) {
      userMessage.steeredInto = data.assistantMessageId;
      rerender(userMessage);
    }
    return null;
  }
  if (!data.assistantMessageId) {
    // Posted to the chat only (a shared chat's message that names no assistant): no reply to
    // wait for; the stream ends with `done`, status `posted`.
    showOtherReplies(data);
    return null;
  }
  turn.assistantMessageId = data.assistantMessageId;
  turn.streaming = true;
  const known = state.messages.has(data.assistantMessageId);
  const assistant = upsert(data.assistantMessageId, 'assistant');
  assistant.local = !known;
  assistant.parentMessageId = data.userMessageId;
  // The server says which assistant answers; until it does, the one asked, or the default.
  assistant.assistantId =
    data.assistantId ?? assistant.assistantId ?? turn.assistantId ?? defaultAssistantId();
  rerender(assistant);
  showOtherReplies(data);
  return assistant;
}

// The events after `metadata`, into the reply; the reply (made for an error without one).
function onReplyEvent(turn, event, data, assistant) {
  if (event === 'token' && assistant) {
    assistant.content += data.text;
  } else if (event === 'handoff' && assistant) {
    turn.streaming = false;
    // The stored row may have been seen already: never step back from what it said.
    if (assistant.status === 'streaming') assistant.status = 'queued';
  } else if (event === 'done' && assistant) {
    turn.streaming = false;
    assistant.endedOnStream = true;
    assistant.content = data.content;
    assistant.status = 'completed';
  } else if (event === 'error') {
    turn.streaming = false;
    assistant = assistant || upsert(turn.assistantMessageId || uuid4(), 'assistant');
    if (data.code === 'interrupted') {
      // A cancel or a newer message took its place: what was streamed is kept, canceled.
      assistant.status = 'canceled';
    } else {
      // The reply as stored: what was streamed stays, and the plain words follow it.
      assistant.status = 'error';
      assistant.endedOnStream = true;
      assistant.content = data.content ?? data.message;
    }
  } else {
    return assistant;
  }
  rerender(assistant);
  return assistant;
}

// A turn's SSE stream (respond or regenerate) into the reply's bubble: `metadata`, `token`s,
// then `done`, `handoff` or `error`. `assistantId`: the assistant asked (none: the default).
export async function streamReply(response, { controller, current, userMessage, assistantId }) {
  const turn = { controller, streaming: false, assistantMessageId: null, assistantId };
  state.turns.add(turn);
  updateControls();

  let assistant = null;
  try {
    for await (const { event, data } of readSse(response.body)) {
      if (!current()) continue;
      if (event === 'metadata') assistant = onMetadata(turn, data, userMessage);
      else assistant = onReplyEvent(turn, event, data, assistant);
    }
  } catch (error) {
    if (aborted(error) || !current()) return;
    showComposerError('The connection dropped while the reply streamed; it goes on on the server.');
  } finally {
    turn.streaming = false;
    state.turns.delete(turn);
    if (current()) {
      if (assistant) rerender(assistant);
      updateControls();
    }
  }
}

export async function cancel() {
  if (!state.chatId) return;
  els.cancel.disabled = true;
  showComposerError('');
  try {
    const result = await state.client.cancel(state.chatId, activeReply()?.assistantId);
    if (state.feed?.status !== 'live' && result && result.canceled) await state.feed?.refresh();
  } catch (error) {
    showComposerError(`Could not cancel: ${error.message}`);
  } finally {
    updateControls();
  }
}

export async function pause() {
  if (!state.chatId) return;
  els.pause.disabled = true;
  showComposerError('');
  try {
    const result = await state.client.pause(state.chatId, activeReply()?.assistantId);
    controls.pausing = result.assistantMessageId;
    const message = state.messages.get(result.assistantMessageId);
    if (message) rerender(message);
  } catch (error) {
    showComposerError(`Could not pause: ${error.message}`);
  } finally {
    updateControls();
  }
}

// Answer the reply's user message again, on a new branch; the new reply streams in its place.
export async function regenerate(reply) {
  if (!state.chatId || controls.regenerating) return;
  showComposerError('');
  const chatId = state.chatId;
  const generation = state.generation;
  const current = () => generation === state.generation;
  const controller = new AbortController();
  controls.regenerating = true;
  updateControls();
  try {
    let response;
    try {
      const options = { assistantId: reply.assistantId };
      response = await state.client.regenerate(chatId, reply.id, options, controller.signal);
    } catch (error) {
      if (aborted(error) || !current()) return;
      showComposerError(
        error.status === 0
          ? 'Not regenerated: the server cannot be reached.'
          : `Not regenerated: ${error.message}`,
      );
      return;
    }
    if (!current()) {
      controller.abort();
      return;
    }
    // The replaced reply stays, stale (its row soon names its replacement); whatever of its
    // assistant's followed it is on the old branch now (its branches are its own: the other
    // assistants' messages stay).
    const ids = [...state.messages.keys()];
    const from = ids.indexOf(reply.id);
    for (const id of from >= 0 ? ids.slice(from + 1) : []) {
      if (state.messages.get(id).assistantId === reply.assistantId) state.messages.delete(id);
    }
    reply.stale = true;
    renderAll();
    const userMessage = state.messages.get(reply.parentMessageId) ?? null;
    const assistantId = reply.assistantId;
    await streamReply(response, { controller, current, userMessage, assistantId });
  } finally {
    controls.regenerating = false;
    if (current()) updateControls();
  }
}

export function updateControls() {
  const active = activeReply();
  const running = state.turns.size > 0 || Boolean(active);
  els.cancel.disabled = !running || !state.chatId;
  els.send.disabled = !state.chatId || state.sending;
  // A reply can be paused while it runs, once; a paused one is resumed from its bubble.
  els.pause.disabled =
    !running ||
    !state.chatId ||
    active?.status === 'paused' ||
    Boolean(active && pausingNow(active));
  // Answering again waits for the chat's running reply (the server would refuse: 409).
  for (const button of els.messages.querySelectorAll('[data-testid="regenerate"]')) {
    button.disabled = running || controls.regenerating;
  }
}
