// The development chat page: plain ES module, no build step, no network beyond this origin.
//
// A turn's first tokens come from POST /api/chat/respond (SSE read with fetch, since
// EventSource cannot POST). Whatever continues in the background arrives as row changes of
// `message` and `message_draft`, through Supabase Realtime with supabase-js (its browser build,
// vendor/supabase.js, which index.html loads as the `supabase` global), subscribed as the
// docs/realtime.md tells a production frontend to; the dev server speaks Realtime's protocol.

const ASSISTANT_ID = 'default';
// A reply still being written, by the quick path or in the background.
// (`paused` keeps the chat's slot until it is resumed or canceled.)
const ACTIVE = new Set(['queued', 'streaming', 'awaiting_approval', 'awaiting_input', 'paused']);
const ENDED = new Set(['completed', 'error', 'canceled']);
const STATUS_LABELS = {
  canceled: 'Canceled',
  error: 'Error',
  paused: 'Paused',
};

// ---------------------------------------------------------------------------------------------
// HTTP

class RequestError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = `The server answered ${response.status} ${response.statusText}.`.trim();
  try {
    const body = await response.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    } else if (body && typeof body.detail === 'string') {
      message = body.detail;
    }
  } catch {
    // Not JSON: keep the status line.
  }
  return new RequestError(response.status, code, message);
}

async function api(session, path, { method = 'GET', body, signal, renew = true } = {}) {
  const headers = { Accept: 'application/json' };
  if (session) headers.Authorization = `Bearer ${session.token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    throw new RequestError(0, 'network', 'The server cannot be reached. Is `handoff dev` running?');
  }
  if (response.status === 401 && session && renew) {
    await errorOf(response);
    await renewSession(session);
    return api(session, path, { method, body, signal, renew: false });
  }
  if (!response.ok) throw await errorOf(response);
  return response.status === 204 ? null : response.json();
}

// The demo user's token is signed with the dev server's secret, which outlives a restart; a
// server started with another data directory (or after its token expired) answers 401, and the
// page asks for a new token once, then tries again, and hands it to Realtime. With supabase-js
// signed in through Supabase Auth, the client refreshes its session itself.
let renewal = null;

function renewSession(session) {
  // Every request that met the 401 meanwhile waits for the same answer.
  renewal =
    renewal ||
    api(null, '/api/dev/session')
      .then((fresh) => {
        session.token = fresh.token;
        session.anonKey = fresh.anonKey;
        onNewToken(session);
      })
      .finally(() => {
        renewal = null;
      });
  return renewal;
}

// Server-Sent Events from a fetch body: calls onEvent(name, data) per event, skips comments.
async function readSse(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let name = 'message';
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
      if (line === '') {
        if (data.length) onEvent(name, JSON.parse(data.join('\n')));
        name = 'message';
        data = [];
      } else if (line.startsWith(':')) {
        // keepalive comment
      } else {
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') name = text;
        else if (field === 'data') data.push(text);
      }
    }
  }
}

function uuid4() {
  // crypto.randomUUID needs a secure context; getRandomValues does not (LAN addresses).
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// ---------------------------------------------------------------------------------------------
// Realtime, with supabase-js
//
// One client per project key, pointed at this origin: supabase-js derives the websocket URL
// (/realtime/v1/websocket) from it. The dev server's anon key is signed with its secret, so a
// server started with another secret is another project: the page makes a new client for it.
//
// The page is not signed in through Supabase Auth (the dev server hands out the demo user's
// token), so supabase-js is given the token through `accessToken`: otherwise it would send
// Realtime the anon key in the user's place at each join and heartbeat, and RLS would show
// nothing. `setAuth` hands a renewed token to the joined channels at once.

const realtime = { client: null, key: null };

function supabaseClient(session) {
  if (realtime.client && realtime.key === session.anonKey) return realtime.client;
  const previous = realtime.client;
  realtime.client = window.supabase.createClient(window.location.origin, session.anonKey, {
    accessToken: async () => session.token,
  });
  realtime.key = session.anonKey;
  previous?.removeAllChannels().finally(() => previous.realtime.disconnect());
  return realtime.client;
}

// A renewed token: to the channels, or, for a new project key, a new client and subscription.
function onNewToken(session) {
  if (!realtime.client || !state.chatId) return;
  if (realtime.key !== session.anonKey) {
    resubscribe();
    return;
  }
  realtime.client.realtime.setAuth(session.token).catch(() => {});
}

function resubscribe() {
  state.channel = subscribe(state.chatId, state.generation, unsubscribe(state.channel));
}

// Leaves the subscription's channel; resolves once it is left (supabase-js hands out the
// channel of a topic it still holds, so a new one waits for that).
function unsubscribe(subscription) {
  if (!subscription) return Promise.resolve();
  subscription.left =
    subscription.left ||
    subscription.joining
      .then((channel) => channel && subscription.client.removeChannel(channel))
      .catch(() => {});
  return subscription.left;
}

// ---------------------------------------------------------------------------------------------
// State

const state = {
  session: null,
  chats: [],
  chatId: null,
  // This chat's subscription: { client, channel }.
  channel: null,
  feedUp: false,
  // Realtime cannot follow this database (no logical decoding): no rejoining.
  feedOff: false,
  // This chat's messages, in display order, by id.
  messages: new Map(),
  // Drafts that arrived before their message row.
  drafts: new Map(),
  // Turns this page sent whose SSE stream is still open (the quick path), and whether a
  // message is on its way.
  turns: new Set(),
  sending: false,
  // Feed events that arrived while the history loads: applied on top of it.
  buffered: null,
  generation: 0,
  // The replies' timelines this page opened, by message id.
  timelines: new Map(),
};

const $ = (testid, root = document) => root.querySelector(`[data-testid="${testid}"]`);
const els = {};

// A message as shown: server fields plus what this page streamed.
function blankMessage(id, role) {
  return {
    id,
    role,
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
    local: false,
  };
}

function upsert(id, role) {
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

// The server stores a message under its own id, derived from the one this page picked: the
// bubble shown at once takes it, or gives way to the stored row if the feed brought that first.
function adoptStoredId(message, storedId) {
  if (!storedId || storedId === message.id) return;
  const pickedId = message.id;
  const held = state.messages.get(pickedId) === message;
  if (held && !state.messages.has(storedId)) {
    // In the bubble's place, before its reply should the feed have brought that first.
    state.messages = new Map(
      [...state.messages].map(([id, known]) => (id === pickedId ? [storedId, known] : [id, known])),
    );
  } else if (held) {
    state.messages.delete(pickedId);
  }
  els.messages.querySelector(`[data-message-id="${CSS.escape(pickedId)}"]`)?.remove();
  if (state.messages.has(storedId) && state.messages.get(storedId) !== message) return;
  message.id = storedId;
  state.messages.set(storedId, message);
}

// The text the user should see: a running reply shows its newest draft (the whole text so far),
// an ended one its content, which the server set from the final state or, on cancel, from the
// last draft.
function shownText(message) {
  if (ACTIVE.has(message.status) && message.draft !== null) {
    return message.draft.length >= message.content.length ? message.draft : message.content;
  }
  return message.content;
}

function applyDraftTo(message, draft) {
  if (draft.seq <= message.draftSeq) return false;
  message.draftSeq = draft.seq;
  message.draft = draft.draft_content;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Rendering

function formatTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return '';
  return date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

function renderChats() {
  const list = els.chatList;
  list.replaceChildren();
  for (const chat of state.chats) {
    const item = document.createElement('li');
    const link = document.createElement('a');
    link.href = `#chat=${chat.id}`;
    link.className = 'chat-link';
    link.dataset.testid = 'chat-item';
    link.dataset.chatId = chat.id;
    if (chat.id === state.chatId) link.setAttribute('aria-current', 'page');
    const title = document.createElement('span');
    title.className = 'chat-link-title';
    title.textContent = chat.title || 'Untitled chat';
    const when = document.createElement('span');
    when.className = 'chat-link-time';
    when.textContent = formatTime(chat.updatedAt || chat.createdAt);
    link.append(title, when);
    item.append(link);
    list.append(item);
  }
  const current = state.chats.find((chat) => chat.id === state.chatId);
  els.title.textContent = current ? current.title || 'Untitled chat' : 'Chat';
  document.title = `${els.title.textContent} · Handoff`;
}

const CHIP_TEXT = {
  pending: 'running',
  approval: 'needs approval',
  completed: 'done',
  error: 'failed',
  stopped: 'stopped',
};

function renderProgress(node, message) {
  const progress = message.progress || [];
  node.hidden = !progress.length;
  node.replaceChildren(
    ...progress.map((call) => {
      // A call still pending when its message ended never finished.
      let status = call.status;
      if (status === 'pending' && ENDED.has(message.status)) status = 'stopped';
      else if (status === 'pending' && message.pendingApproval?.toolCallId === call.id) {
        status = message.status === 'awaiting_approval' ? 'approval' : status;
      }
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

// Control, format (bidi controls, zero-width characters), separator, surrogate, private-use and
// unassigned characters, and the invisible ones of other categories (agent/display.py).
const HIDDEN =
  /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\u034f\u115f\u1160\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0\u{e0100}-\u{e01ef}]/gu;

// Each such character as a JSON escape (its UTF-16 units), `\u202e`; but line breaks, which in
// JSON text are the indentation's (a string's own are escaped already).
function visibleText(text) {
  const escape = (char) =>
    char === '\n'
      ? char
      : char
          .split('')
          .map((unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`)
          .join('');
  return text.replace(HIDDEN, escape);
}

function renderApproval(bubble, message) {
  const pending = message.pendingApproval;
  const existing = $('approval', bubble);
  const show =
    message.status === 'awaiting_approval' && pending && !message.decided.has(pending.toolCallId);
  if (!show) {
    existing?.remove();
    return;
  }
  if (existing && existing.dataset.toolCallId === pending.toolCallId) return;
  existing?.remove();
  const card = els.approvalTemplate.content.firstElementChild.cloneNode(true);
  card.dataset.toolCallId = pending.toolCallId;
  $('approval-tool', card).textContent = pending.name;
  // The server's `display` escapes what could hide or reorder text; a question asked before it
  // had one is escaped here the same way.
  $('approval-args', card).textContent = visibleText(
    pending.display ?? JSON.stringify(pending.args ?? {}, null, 2),
  );
  const note = $('approval-note', card);
  const decide = async (approved) => {
    const buttons = card.querySelectorAll('button');
    buttons.forEach((button) => { button.disabled = true; });
    const error = $('approval-error', card);
    error.hidden = true;
    try {
      const body = { approved };
      if (note.value.trim()) body.note = note.value.trim();
      await api(
        state.session,
        `/api/chat/${state.chatId}/approvals/${encodeURIComponent(pending.toolCallId)}`,
        { method: 'POST', body },
      );
      message.decided.add(pending.toolCallId);
      renderMessage(message);
    } catch (failure) {
      if (failure.code === 'approval_already_decided' || failure.code === 'approval_not_found') {
        message.decided.add(pending.toolCallId);
        renderMessage(message);
        showComposerError(failure.message);
        return;
      }
      error.textContent = failure.message;
      error.hidden = false;
      buttons.forEach((button) => { button.disabled = false; });
    }
  };
  $('approve', card).addEventListener('click', () => decide(true));
  $('reject', card).addEventListener('click', () => decide(false));
  $('message-text', bubble).after(card);
}

function isStreamingHere(message) {
  for (const turn of state.turns) {
    if (turn.streaming && turn.assistantMessageId === message.id) return true;
  }
  return false;
}

function renderMessage(message) {
  let node = els.messages.querySelector(`[data-message-id="${CSS.escape(message.id)}"]`);
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
  const background =
    !streamingHere &&
    (message.status === 'queued' ||
      message.status === 'streaming' ||
      ((message.status === 'awaiting_approval' || message.status === 'awaiting_input') &&
        !askingUser));
  node.dataset.role = message.role;
  node.dataset.status = status;
  node.dataset.phase = streamingHere ? 'quick' : background ? 'background' : message.status;
  node.className = `message message-${message.role} status-${status}`;
  const bubble = node.querySelector('.bubble');
  // Screen readers wait for the finished text instead of reading every token.
  const busy = ACTIVE.has(status) && !askingUser && status !== 'paused';
  bubble.setAttribute('aria-busy', String(busy));

  const text = shownText(message);
  const textNode = $('message-text', node);
  if (textNode.textContent !== text) textNode.textContent = text;

  const label = $('message-label', node);
  let labelText = '';
  if (message.role === 'assistant' && !streamingHere) {
    if (approving) labelText = 'Waiting for your approval';
    else if (asking) labelText = 'Waiting for your answer';
    else if (pausingNow(message)) labelText = 'Pausing at its next step…';
    else labelText = STATUS_LABELS[message.status] || '';
  } else if (message.role === 'user' && message.steeredInto) {
    labelText = 'Added to the reply above';
  }
  label.hidden = !labelText;
  label.textContent = labelText;

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
      const node = els.messages.querySelector(`[data-message-id="${CSS.escape(key)}"]`);
      if (node) return node;
    } else if (key === id) {
      after = true;
    }
  }
  return null;
}

function renderAll() {
  const ids = new Set(state.messages.keys());
  for (const node of [...els.messages.children]) {
    if (!ids.has(node.dataset.messageId)) node.remove();
  }
  for (const message of state.messages.values()) renderMessage(message);
  // Keep DOM order equal to the map's order.
  for (const message of state.messages.values()) {
    const node = els.messages.querySelector(`[data-message-id="${CSS.escape(message.id)}"]`);
    els.messages.append(node);
  }
  afterRender();
}

let stickToBottom = true;

function afterRender() {
  els.empty.hidden = state.messages.size > 0;
  updateControls();
  watchBranches();
  if (stickToBottom) els.messages.scrollTop = els.messages.scrollHeight;
}

function rerender(message) {
  renderMessage(message);
  afterRender();
}

function activeReply() {
  for (const message of [...state.messages.values()].reverse()) {
    if (message.role === 'assistant' && ACTIVE.has(message.status)) return message;
  }
  return null;
}

function updateControls() {
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

function showBanner(text) {
  els.banner.textContent = text;
  els.banner.hidden = !text;
}

function showComposerError(text) {
  els.composerError.textContent = text;
  els.composerError.hidden = !text;
}

function setFeedState(kind, text) {
  els.feedStatus.dataset.state = kind;
  els.feedStatus.textContent = text;
}

// ---------------------------------------------------------------------------------------------
// A reply's timeline: the spans of its turn's trace as a waterfall (GET
// /api/dev/messages/{id}/timeline: `handoff dev` keeps the last turns' traces in memory), and
// the reply's token usage.

// While spans of the turn still run, the open timeline asks again, for a minute at most.
const TIMELINE_POLL_MS = 500;
const TIMELINE_POLLS = 120;

function formatMs(ms) {
  if (ms >= 1000) return `${(ms / 1000).toFixed(ms >= 10000 ? 1 : 2)} s`;
  if (ms >= 10) return `${Math.round(ms)} ms`;
  return `${ms.toFixed(1)} ms`;
}

function usageText(usage) {
  if (!usage || typeof usage.input !== 'number') return 'Usage: not recorded yet.';
  const calls = Array.isArray(usage.rounds) ? usage.rounds.length : 0;
  const over = calls === 0 ? '' : calls === 1 ? ', in one model call' : `, in ${calls} model calls`;
  return `Usage: ${usage.input} tokens in, ${usage.output} out${over}.`;
}

function timelineOf(id) {
  let entry = state.timelines.get(id);
  if (!entry) {
    entry = { open: false, request: 0, polls: 0, timer: null, ended: false };
    state.timelines.set(id, entry);
  }
  return entry;
}

function wireTimeline(node) {
  const button = $('timeline-toggle', node);
  const panel = $('timeline-panel', node);
  panel.id = `timeline-${node.dataset.messageId}`;
  button.setAttribute('aria-controls', panel.id);
  button.addEventListener('click', () => {
    const entry = timelineOf(node.dataset.messageId);
    entry.open = !entry.open;
    button.setAttribute('aria-expanded', String(entry.open));
    panel.hidden = !entry.open;
    node.dataset.timeline = entry.open ? 'open' : 'closed';
    clearTimeout(entry.timer);
    entry.request += 1; // an answer still on its way is for a panel since closed
    if (entry.open) {
      entry.polls = 0;
      loadTimeline(node, entry);
    }
  });
}

function renderTimeline(node, message) {
  const box = $('timeline', node);
  box.hidden = message.role !== 'assistant';
  if (box.hidden) return;
  const usage = $('timeline-usage', node);
  const text = usageText(message.usage);
  if (usage.textContent !== text) usage.textContent = text;
  // A reply that ended while its timeline was open: its last steps are in the trace now.
  const entry = state.timelines.get(message.id);
  if (entry && entry.open && !entry.ended && ENDED.has(message.status)) {
    clearTimeout(entry.timer);
    entry.polls = 0;
    loadTimeline(node, entry);
  }
}

async function loadTimeline(node, entry) {
  const id = node.dataset.messageId;
  const request = ++entry.request;
  const message = state.messages.get(id);
  entry.ended = Boolean(message && ENDED.has(message.status));
  const panel = $('timeline-panel', node);
  if (!panel.dataset.state) {
    panel.dataset.state = 'loading';
    $('timeline-summary', panel).textContent = 'Loading the timeline…';
  }
  let body;
  try {
    body = await api(state.session, `/api/dev/messages/${encodeURIComponent(id)}/timeline`);
  } catch (error) {
    if (request !== entry.request || error.name === 'AbortError') return;
    panel.dataset.state = 'error';
    $('timeline-summary', panel).textContent = error.message;
    $('waterfall', panel).hidden = true;
    return;
  }
  if (request !== entry.request) return;
  renderWaterfall(panel, body);
  if (body.runningSpans > 0 && entry.polls < TIMELINE_POLLS) {
    entry.polls += 1;
    entry.timer = setTimeout(() => {
      if (entry.open && node.isConnected) loadTimeline(node, entry);
    }, TIMELINE_POLL_MS);
  }
}

function spanKind(span) {
  if (span.depth === 0) return 'turn';
  if (span.attempt !== null && span.attempt !== undefined) return 'step';
  if (span.model) return 'model';
  return 'work';
}

function spanMark(kind, text) {
  const mark = document.createElement('span');
  mark.className = `span-mark span-mark-${kind}`;
  mark.dataset.testid = 'span-mark';
  mark.textContent = text;
  return mark;
}

function spanRow(span, total) {
  const failed = span.error !== null && span.error !== undefined;
  const retry = (span.attempt ?? 0) > 0;
  const row = document.createElement('tr');
  row.className = `span-row span-kind-${spanKind(span)}`;
  row.classList.toggle('span-failed', failed);
  row.classList.toggle('span-retry', retry);
  row.dataset.testid = 'span-row';
  row.dataset.depth = String(span.depth);

  const name = document.createElement('th');
  name.scope = 'row';
  name.className = 'span-name';
  name.style.paddingInlineStart = `${0.4 + span.depth * 1.2}em`;
  const label = document.createElement('span');
  label.className = 'span-label';
  label.dataset.testid = 'span-name';
  label.textContent = span.name;
  name.append(label);
  // A step's attempt counts from 0: attempt 1 is its first retry.
  // (spaces between the parts, for the row read as text)
  if (retry) name.append(' ', spanMark('retry', `retry ${span.attempt}`));
  if (failed) name.append(' ', spanMark('failed', 'failed'));
  const details = [];
  if (failed) details.push(span.error);
  if (span.inputTokens !== null && span.inputTokens !== undefined) {
    details.push(`${span.inputTokens} in · ${span.outputTokens ?? 0} out tokens`);
  }
  if (details.length) {
    const detail = document.createElement('span');
    detail.className = 'span-detail';
    detail.textContent = details.join(' · ');
    name.append(' ', detail);
  }

  const when = document.createElement('td');
  when.className = 'span-when';
  const at = document.createElement('span');
  at.className = 'visually-hidden';
  at.textContent = `starts at ${formatMs(span.startMs)}`;
  const track = document.createElement('div');
  track.className = 'span-track';
  track.setAttribute('aria-hidden', 'true');
  const bar = document.createElement('div');
  bar.className = 'span-bar';
  bar.dataset.testid = 'span-bar';
  // (a bar too short to see is drawn 2px wide, and still ends inside its track)
  bar.style.left = `min(${Math.min(100, (span.startMs / total) * 100)}%, 100% - 2px)`;
  bar.style.width = `${Math.min(100, (span.durationMs / total) * 100)}%`;
  bar.title = `${span.name}: from ${formatMs(span.startMs)} to ${formatMs(span.startMs + span.durationMs)}`;
  track.append(bar);
  when.append(at, track);

  const took = document.createElement('td');
  took.className = 'span-took';
  took.dataset.testid = 'span-took';
  took.textContent = formatMs(span.durationMs);
  row.append(name, when, took);
  return row;
}

function renderWaterfall(panel, body) {
  const table = $('waterfall', panel);
  const total = Math.max(body.durationMs, 0.001);
  table.tBodies[0].replaceChildren(...body.spans.map((span) => spanRow(span, total)));
  table.hidden = body.spans.length === 0;
  const count = body.spans.length;
  const parts = [`${count} ${count === 1 ? 'span' : 'spans'} over ${formatMs(body.durationMs)}`];
  if (body.droppedSpans) parts.push(`${body.droppedSpans} more not kept`);
  if (body.runningSpans) parts.push(`${body.runningSpans} still running…`);
  $('timeline-summary', panel).textContent = `${parts.join(' · ')}.`;
  panel.dataset.state = body.runningSpans ? 'running' : 'done';
}

// ---------------------------------------------------------------------------------------------
// History and the change feed

function fromHistory(row) {
  const message = blankMessage(row.id, row.role);
  Object.assign(message, {
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

async function loadHistory(generation) {
  let messages;
  try {
    ({ messages } = await api(state.session, `/api/chat/${state.chatId}/history`));
  } catch (error) {
    // Changes held back for the history are not held for ever.
    if (generation === state.generation) applyBuffered();
    throw error;
  }
  if (generation !== state.generation) return;
  const previous = state.messages;
  state.messages = new Map();
  for (const row of messages) {
    if (row.stale || (row.role !== 'user' && row.role !== 'assistant')) continue;
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
      if (isStreamingHere(known)) message.content = known.content;
    }
    // A reply still in the background comes with its latest draft; the feed's are newer.
    if (row.draft) applyDraftTo(message, { seq: row.draft.seq, draft_content: row.draft.content });
    state.messages.set(row.id, message);
  }
  // Bubbles of the turn in flight that the server has not stored yet stay at the end.
  for (const [id, message] of previous) {
    if (!state.messages.has(id) && message.local) state.messages.set(id, message);
  }
  applyBuffered();
}

function applyBuffered() {
  const buffered = state.buffered || [];
  state.buffered = null;
  for (const payload of buffered) applyChange(payload, false);
  renderAll();
}

function onMessageRow(row) {
  if (row.assistant_id && row.assistant_id !== ASSISTANT_ID) return null;
  if (row.role !== 'user' && row.role !== 'assistant') return null;
  const metadata = row.metadata || {};
  if (metadata.stale) {
    state.messages.delete(row.id);
    return null;
  }
  const message = upsert(row.id, row.role);
  // The quick path's own stream is ahead of any stored row while it lasts.
  if (!isStreamingHere(message) || ENDED.has(row.status)) message.content = row.content;
  message.status = row.status;
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
    const held = state.drafts.get(row.message_id);
    if (!held || held.seq < row.seq) state.drafts.set(row.message_id, row);
    return null;
  }
  return applyDraftTo(message, row) ? message : null;
}

function applyChange(payload, render = true) {
  if (state.buffered) {
    state.buffered.push(payload);
    return;
  }
  const row = payload.new;
  if (!row) return;
  const message = payload.table === 'message' ? onMessageRow(row) : onDraftRow(row);
  if (!render) return;
  if (message) rerender(message);
  else if (payload.table === 'message') renderAll();
}

// A draft whose seq skips one of the message's means changes were missed (a dropped frame, a
// subscriber Realtime cut off): the history has them all.
let catchingUp = false;

function catchUp(generation) {
  if (catchingUp || state.buffered || generation !== state.generation) return;
  catchingUp = true;
  state.buffered = [];
  loadHistory(generation)
    .catch(reportLoadError)
    .finally(() => {
      catchingUp = false;
    });
}

function onDraftChange(payload, generation) {
  const row = payload.new;
  const message = row && state.messages.get(row.message_id);
  const last = message && !state.buffered ? message.draftSeq : -1;
  const gap = last > 0 && row.seq > last + 1;
  applyChange(payload);
  if (gap) catchUp(generation);
}

// Realtime's word that the database cannot be followed (no logical decoding): it will not learn
// to, so the page polls the history instead of rejoining.
const UNAVAILABLE = /wal_level|logical decoding|logical replication/i;

// This chat's subscription, once `after` (the previous one's leave) is done: returned at once,
// as { client, joining } (joining: its channel, once made).
function subscribe(chatId, generation, after = Promise.resolve()) {
  state.buffered = [];
  state.feedUp = false;
  state.feedOff = false;
  setFeedState('connecting', 'Connecting…');
  const session = state.session;
  const client = supabaseClient(session);
  const subscription = { client, joining: null, left: null };
  const current = () => generation === state.generation && state.channel === subscription;
  const down = (text, banner) => {
    state.feedUp = false;
    setFeedState('down', text);
    if (banner) showBanner(banner);
    // Until the feed is back, show what is stored (and poll it, see below).
    state.buffered = null;
    loadHistory(generation).catch(reportLoadError);
  };
  const rejoinLater = () =>
    setTimeout(() => {
      if (current()) resubscribe();
    }, 1000);
  const filter = `chat_id=eq.${chatId}`;
  subscription.joining = after
    // The token first: the join carries it, so the channel is the user's from its first change.
    .then(() => client.realtime.setAuth(session.token))
    .then(() => {
      if (!current()) return null;
      return client
        // Private: joined only when the policies on realtime.messages let the user read it.
        .channel(`chat:${chatId}`, { config: { private: true } })
        // (A wrapper: supabase-js passes more arguments than the payload.)
        .on(
          'postgres_changes',
          { event: '*', schema: 'public', table: 'message', filter },
          (payload) => applyChange(payload),
        )
        .on(
          'postgres_changes',
          { event: '*', schema: 'public', table: 'message_draft', filter },
          (payload) => onDraftChange(payload, generation),
        )
        .on('system', {}, (payload) => {
          if (!current() || payload.status !== 'error') return;
          if (payload.extension === 'postgres_changes' && UNAVAILABLE.test(payload.message)) {
            state.feedOff = true;
            down('No live updates', `Live updates are off: ${payload.message}`);
            return;
          }
          // The feed dropped this channel (it fell behind, or lost its slot), or its token
          // ended: changes may be missing; the history has them, and a new join gets a working
          // feed (with a new token, when it was the token).
          down('Reconnecting…');
          if (/expired|JWT|token/i.test(payload.message)) {
            renewSession(session).then(rejoinLater, rejoinLater);
          } else {
            rejoinLater();
          }
        })
        .subscribe((status, error) => {
          if (!current()) return;
          if (status === 'SUBSCRIBED') {
            state.feedUp = true;
            state.feedOff = false;
            setFeedState('live', 'Live');
            showBanner('');
            // Subscribed first, history second: nothing that happens in between is missed.
            state.buffered = state.buffered || [];
            loadHistory(generation).catch(reportLoadError);
          } else if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') {
            if (state.feedOff) return;
            // The socket is gone (supabase-js reconnects it and rejoins), or the join was
            // refused: a token the server does not take is renewed; the rejoin carries it.
            down('Reconnecting…');
            if (error && /JWT|token/i.test(error.message)) renewSession(session).catch(() => {});
          } else if (status === 'CLOSED') {
            // Closed by the server (the page's own leave makes `current()` false): rejoin.
            down('Reconnecting…');
            rejoinLater();
          }
        });
    });
  return subscription;
}

function reportLoadError(error) {
  if (error.name === 'AbortError') return;
  showBanner(`Could not load this chat: ${error.message}`);
}

// While the feed is down the page polls the stored history: while a reply runs, and while it
// waits for the server to come back (whose 401, after a restart with a new secret, brings a new
// token and key, and with them a new subscription).
setInterval(() => {
  if (!state.session || !state.chatId || state.feedUp || state.buffered) return;
  if (state.feedOff && !activeReply()) return;
  loadHistory(state.generation).catch(state.feedOff ? () => {} : reportLoadError);
}, 1500);

// ---------------------------------------------------------------------------------------------
// Chats

function chatFromHash() {
  const match = /(?:^#|&)chat=([0-9a-fA-F-]{36})/.exec(window.location.hash);
  return match ? match[1].toLowerCase() : null;
}

async function loadChats() {
  const { chats } = await api(state.session, '/api/chats');
  state.chats = chats;
  renderChats();
}

function openChat(chatId) {
  if (chatId === state.chatId && state.channel) return;
  state.generation += 1;
  const generation = state.generation;
  const leaving = unsubscribe(state.channel);
  state.channel = null;
  for (const turn of state.turns) turn.controller.abort();
  state.turns = new Set();
  state.sending = false;
  state.chatId = chatId;
  state.messages = new Map();
  state.drafts = new Map();
  for (const entry of state.timelines.values()) clearTimeout(entry.timer);
  state.timelines = new Map();
  els.messages.replaceChildren();
  showComposerError('');
  showBanner('');
  if (window.location.hash !== `#chat=${chatId}`) {
    history.replaceState(null, '', `#chat=${chatId}`);
  }
  renderChats();
  afterRender();
  state.channel = subscribe(chatId, generation, leaving);
}

async function newChat() {
  els.newChat.disabled = true;
  try {
    const chat = await api(state.session, '/api/chats', { method: 'POST', body: {} });
    state.chats = [chat, ...state.chats.filter((c) => c.id !== chat.id)];
    window.location.hash = `chat=${chat.id}`;
    openChat(chat.id);
    els.input.focus();
  } catch (error) {
    showBanner(`Could not create a chat: ${error.message}`);
  } finally {
    els.newChat.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Sending, canceling

async function send() {
  const content = els.input.value;
  if (!content.trim() || !state.chatId || state.sending) return;
  showComposerError('');
  const chatId = state.chatId;
  const generation = state.generation;
  const userMessage = upsert(uuid4(), 'user');
  Object.assign(userMessage, { content, status: 'completed', local: true });
  const controller = new AbortController();
  state.sending = true;
  els.input.value = '';
  stickToBottom = true;
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

  const body = JSON.stringify({
    chatId,
    content,
    userMessageId: userMessage.id,
    multitaskStrategy: els.strategy.value,
  });
  const post = () =>
    fetch('/api/chat/respond', {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${state.session.token}`,
        'Content-Type': 'application/json',
        Accept: 'text/event-stream',
      },
      body,
      signal: controller.signal,
    });
  let response;
  try {
    response = await post();
    if (response.status === 401) {
      // Nothing was stored: ask for a new token once, and send the same message again.
      await errorOf(response);
      await renewSession(state.session);
      response = await post();
    }
  } catch (error) {
    if (error.name !== 'AbortError') {
      refused('Not sent: the server cannot be reached. Your message is still in the box.');
    }
    return;
  }
  if (!response.ok) {
    const error = await errorOf(response);
    refused(`Not sent: ${error.message}`);
    return;
  }
  if (!current()) {
    controller.abort();
    return;
  }
  // Accepted: another message may follow now (its strategy decides what happens to this one).
  state.sending = false;
  await streamReply(response, { controller, current, userMessage });
}

// A turn's SSE stream (respond or regenerate) into the reply's bubble: `metadata`, `token`s,
// then `done`, `handoff` or `error`.
async function streamReply(response, { controller, current, userMessage }) {
  const turn = { controller, streaming: false, assistantMessageId: null };
  state.turns.add(turn);
  updateControls();

  let assistant = null;
  try {
    await readSse(response, (event, data) => {
      if (!current()) return;
      if (event === 'metadata') {
        if (userMessage) adoptStoredId(userMessage, data.userMessageId);
        // (under its stored id, in its place)
        const stored = state.messages.get(data.userMessageId);
        if (stored) renderMessage(stored);
        if (data.strategy === 'steer') {
          // Joined the reply that runs: no reply of its own; that one answers it too.
          if (userMessage) {
            userMessage.steeredInto = data.assistantMessageId;
            rerender(userMessage);
          }
          return;
        }
        turn.assistantMessageId = data.assistantMessageId;
        turn.streaming = true;
        const known = state.messages.has(data.assistantMessageId);
        assistant = upsert(data.assistantMessageId, 'assistant');
        assistant.local = !known;
        assistant.parentMessageId = data.userMessageId;
        rerender(assistant);
      } else if (event === 'token' && assistant) {
        assistant.content += data.text;
        rerender(assistant);
      } else if (event === 'handoff' && assistant) {
        turn.streaming = false;
        // The stored row may have been seen already: never step back from what it said.
        if (assistant.status === 'streaming') assistant.status = 'queued';
        rerender(assistant);
      } else if (event === 'done' && assistant) {
        turn.streaming = false;
        assistant.content = data.content;
        assistant.status = 'completed';
        rerender(assistant);
      } else if (event === 'error') {
        turn.streaming = false;
        assistant = assistant || upsert(turn.assistantMessageId || uuid4(), 'assistant');
        if (data.code === 'interrupted') {
          // A cancel or a newer message took its place: what was streamed is kept, canceled.
          assistant.status = 'canceled';
        } else {
          // The reply as stored: what was streamed stays, and the plain words follow it.
          assistant.status = 'error';
          assistant.content = data.content ?? data.message;
        }
        rerender(assistant);
      }
    });
  } catch (error) {
    if (error.name === 'AbortError' || !current()) return;
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

async function cancel() {
  if (!state.chatId) return;
  els.cancel.disabled = true;
  showComposerError('');
  try {
    const result = await api(state.session, `/api/chat/${state.chatId}/cancel`, {
      method: 'POST',
      body: {},
    });
    if (!state.feedUp && result && result.canceled) {
      await loadHistory(state.generation);
    }
  } catch (error) {
    showComposerError(`Could not cancel: ${error.message}`);
  } finally {
    updateControls();
  }
}

// ---------------------------------------------------------------------------------------------
// Conversation control: the model's questions, pause and resume, regenerate, branches

// What this page asked of the server and is waiting to see in the rows.
const controls = {
  // The reply a pause was asked for, until its row says `paused` (or it ends).
  pausing: null,
  regenerating: false,
  // The branches shown in the switcher, and what they were loaded for.
  branchesKey: '',
  branchesTimer: null,
  branchesRequest: 0,
  activeBranchId: null,
};

function awaitsApproval(message) {
  const pending = message.pendingApproval;
  return (
    message.status === 'awaiting_approval' &&
    Boolean(pending) &&
    !message.decided.has(pending.toolCallId)
  );
}

function awaitsAnswer(message) {
  const pending = message.pendingQuestion;
  return (
    message.status === 'awaiting_input' &&
    Boolean(pending) &&
    !message.answered.has(pending.questionId)
  );
}

function pausingNow(message) {
  return (
    controls.pausing === message.id && message.status !== 'paused' && !ENDED.has(message.status)
  );
}

// The model's question: its context, one button per suggested answer, and a box for one's own.
function renderQuestion(bubble, message) {
  const pending = message.pendingQuestion;
  const existing = $('question', bubble);
  if (!awaitsAnswer(message)) {
    existing?.remove();
    return;
  }
  if (existing && existing.dataset.questionId === pending.questionId) return;
  existing?.remove();
  const card = els.questionTemplate.content.firstElementChild.cloneNode(true);
  card.dataset.questionId = pending.questionId;
  // The model wrote these: whatever could hide or reorder text shows as an escape.
  $('question-text', card).textContent = visibleText(String(pending.question ?? ''));
  const context = $('question-context', card);
  context.textContent = visibleText(String(pending.context ?? ''));
  context.hidden = !pending.context;
  const own = $('question-answer', card);
  const error = $('question-error', card);
  const answer = async (text) => {
    const inputs = card.querySelectorAll('button, input');
    inputs.forEach((input) => { input.disabled = true; });
    error.hidden = true;
    try {
      await api(
        state.session,
        `/api/chat/${state.chatId}/answers/${encodeURIComponent(pending.questionId)}`,
        { method: 'POST', body: { answer: text } },
      );
      message.answered.add(pending.questionId);
      rerender(message);
    } catch (failure) {
      if (
        failure.code === 'question_already_answered' ||
        failure.code === 'question_not_pending'
      ) {
        // Answered elsewhere, timed out or canceled: this card has nothing left to ask.
        message.answered.add(pending.questionId);
        rerender(message);
        showComposerError(failure.message);
        return;
      }
      error.textContent = `Not answered: ${failure.message}`;
      error.hidden = false;
      inputs.forEach((input) => { input.disabled = false; });
    }
  };
  const options = Array.isArray(pending.options) ? pending.options : [];
  $('question-options', card).replaceChildren(
    ...options.map((option) => {
      const button = document.createElement('button');
      button.type = 'button';
      button.className = 'button question-option';
      button.dataset.testid = 'question-option';
      button.textContent = visibleText(String(option));
      button.addEventListener('click', () => answer(String(option)));
      return button;
    }),
  );
  $('question-own', card).addEventListener('submit', (event) => {
    event.preventDefault();
    if (own.value.trim()) answer(own.value.trim());
  });
  $('message-text', bubble).after(card);
}

// A paused reply: Resume, with an optional instruction for the rest of its turn.
function renderPaused(bubble, message) {
  const existing = $('paused', bubble);
  if (message.role !== 'assistant' || message.status !== 'paused') {
    existing?.remove();
    return;
  }
  if (existing) return;
  const card = els.pausedTemplate.content.firstElementChild.cloneNode(true);
  const form = card.querySelector('form');
  const instruction = $('resume-instruction', card);
  const error = $('paused-error', card);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const inputs = card.querySelectorAll('button, input');
    inputs.forEach((input) => { input.disabled = true; });
    error.hidden = true;
    try {
      const body = {};
      if (instruction.value.trim()) body.instruction = instruction.value.trim();
      await api(state.session, `/api/chat/${state.chatId}/resume`, { method: 'POST', body });
      if (!state.feedUp) await loadHistory(state.generation);
    } catch (failure) {
      error.textContent = `Not resumed: ${failure.message}`;
      error.hidden = false;
      inputs.forEach((input) => { input.disabled = false; });
    }
  });
  $('message-text', bubble).after(card);
}

function renderActions(node, message) {
  const actions = $('message-actions', node);
  actions.hidden =
    message.role !== 'assistant' || !ENDED.has(message.status) || isStreamingHere(message);
  if (actions.hidden || actions.dataset.wired) return;
  actions.dataset.wired = 'true';
  $('regenerate', actions).addEventListener('click', () => {
    const current = state.messages.get(node.dataset.messageId);
    if (current) regenerate(current);
  });
}

async function pause() {
  if (!state.chatId) return;
  els.pause.disabled = true;
  showComposerError('');
  try {
    const result = await api(state.session, `/api/chat/${state.chatId}/pause`, {
      method: 'POST',
      body: {},
    });
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
async function regenerate(reply) {
  if (!state.chatId || controls.regenerating) return;
  showComposerError('');
  const chatId = state.chatId;
  const generation = state.generation;
  const current = () => generation === state.generation;
  const controller = new AbortController();
  controls.regenerating = true;
  updateControls();
  const post = () =>
    fetch(`/api/chat/${chatId}/messages/${encodeURIComponent(reply.id)}/regenerate`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${state.session.token}`,
        'Content-Type': 'application/json',
        Accept: 'text/event-stream',
      },
      body: JSON.stringify({}),
      signal: controller.signal,
    });
  try {
    let response;
    try {
      response = await post();
      if (response.status === 401) {
        await errorOf(response);
        await renewSession(state.session);
        response = await post();
      }
    } catch (error) {
      if (error.name !== 'AbortError' && current()) {
        showComposerError('Not regenerated: the server cannot be reached.');
      }
      return;
    }
    if (!response.ok) {
      const error = await errorOf(response);
      if (current()) showComposerError(`Not regenerated: ${error.message}`);
      return;
    }
    if (!current()) {
      controller.abort();
      return;
    }
    // The replaced reply, and whatever followed it, are on the old branch now.
    const ids = [...state.messages.keys()];
    const from = ids.indexOf(reply.id);
    for (const id of from >= 0 ? ids.slice(from) : []) state.messages.delete(id);
    renderAll();
    const userMessage = state.messages.get(reply.parentMessageId) ?? null;
    await streamReply(response, { controller, current, userMessage });
  } finally {
    controls.regenerating = false;
    if (current()) updateControls();
  }
}

// The branch switcher: shown while the chat has more than one branch. Loaded again whenever the
// messages shown change (a fork adds a reply, a switch replaces them).
function watchBranches() {
  const key = `${state.chatId}|${[...state.messages.values()]
    .map((message) => `${message.id}:${message.status}`)
    .join(',')}`;
  if (key === controls.branchesKey) return;
  if (!key.startsWith(`${controls.branchesKey.split('|')[0]}|`)) els.branches.hidden = true;
  controls.branchesKey = key;
  clearTimeout(controls.branchesTimer);
  controls.branchesTimer = setTimeout(loadBranches, 250);
}

// `original · 10:42: …answered: Berlin.`: the branch, when its latest message was written, and
// how that message ends (replies answered again begin alike and differ at the end).
function branchLabel(branch, index) {
  const latest = branch.latestMessage;
  const name = index === 0 ? 'original' : `version ${index + 1}`;
  if (!latest) return name;
  let preview = visibleText(latest.content.replace(/\s+/g, ' ').trim());
  if (preview.length > 28) preview = `…${preview.slice(-27)}`;
  return `${name} · ${formatTime(latest.createdAt)}: ${preview}`;
}

async function loadBranches() {
  const chatId = state.chatId;
  if (!state.session || !chatId) return;
  const request = ++controls.branchesRequest;
  let body;
  try {
    body = await api(state.session, `/api/chat/${chatId}/branches`);
  } catch {
    return; // the switcher waits for the next change; the page says what else went wrong
  }
  if (request !== controls.branchesRequest || chatId !== state.chatId) return;
  controls.activeBranchId = body.activeBranchId;
  const select = els.branchSelect;
  select.replaceChildren(
    ...body.branches.map((branch, index) => {
      const option = document.createElement('option');
      option.value = branch.id;
      option.textContent = branchLabel(branch, index);
      option.selected = branch.id === body.activeBranchId;
      return option;
    }),
  );
  select.value = body.activeBranchId;
  els.branches.hidden = body.branches.length < 2;
  els.branches.dataset.activeBranchId = body.activeBranchId;
}

async function activateBranch(branchId) {
  if (!state.chatId || branchId === controls.activeBranchId) return;
  const chatId = state.chatId;
  showComposerError('');
  els.branchSelect.disabled = true;
  try {
    await api(
      state.session,
      `/api/chat/${chatId}/branches/${encodeURIComponent(branchId)}/activate`,
      { method: 'POST', body: {} },
    );
    controls.activeBranchId = branchId;
    els.branches.dataset.activeBranchId = branchId;
    // The history follows the active branch.
    if (chatId === state.chatId) await loadHistory(state.generation);
  } catch (error) {
    if (error.name === 'AbortError') return;
    showComposerError(`Could not switch branches: ${error.message}`);
    els.branchSelect.value = controls.activeBranchId;
  } finally {
    els.branchSelect.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Start

async function start() {
  Object.assign(els, {
    chatList: $('chat-list'),
    newChat: $('new-chat'),
    title: $('chat-title'),
    feedStatus: $('feed-status'),
    banner: $('error-banner'),
    messages: $('messages'),
    empty: $('empty'),
    form: $('composer'),
    input: $('composer-input'),
    strategy: $('strategy'),
    send: $('send'),
    cancel: $('cancel'),
    pause: $('pause'),
    branches: $('branches'),
    branchSelect: $('branch-select'),
    composerError: $('composer-error'),
    userEmail: $('user-email'),
    messageTemplate: document.getElementById('message-template'),
    approvalTemplate: document.getElementById('approval-template'),
    questionTemplate: document.getElementById('question-template'),
    pausedTemplate: document.getElementById('paused-template'),
  });
  els.form.addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  els.input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  els.cancel.addEventListener('click', cancel);
  els.pause.addEventListener('click', pause);
  els.branchSelect.addEventListener('change', () => activateBranch(els.branchSelect.value));
  for (const example of document.querySelectorAll('[data-testid="example"]')) {
    example.addEventListener('click', () => {
      els.input.value = example.dataset.example;
      els.input.focus();
    });
  }
  els.newChat.addEventListener('click', newChat);
  els.messages.addEventListener('scroll', () => {
    const { scrollTop, scrollHeight, clientHeight } = els.messages;
    stickToBottom = scrollHeight - scrollTop - clientHeight < 48;
  });
  window.addEventListener('hashchange', () => {
    const chatId = chatFromHash();
    if (chatId && chatId !== state.chatId) openChat(chatId);
  });
  updateControls();

  try {
    state.session = await api(null, '/api/dev/session');
  } catch (error) {
    showBanner(`Could not start a session: ${error.message}`);
    setFeedState('down', 'Offline');
    return;
  }
  els.userEmail.textContent = state.session.email;
  try {
    await loadChats();
  } catch (error) {
    showBanner(`Could not list your chats: ${error.message}`);
  }
  const wanted = chatFromHash();
  openChat(wanted || state.session.chatId);
  els.input.focus();
}

start();
