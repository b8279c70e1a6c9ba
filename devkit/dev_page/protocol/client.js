// The Handoff API as a frontend speaks it, for the dev page: the session and its renewal, every
// route the page calls (respond and regenerate as SSE streams, cancel, pause and resume, answers,
// approvals, branches, chats and their members, cascades, the history, a reply's timeline), and
// the Realtime client. It knows
// nothing of the page (no DOM): it answers with values and RequestErrors, and says when it
// renewed the session's token with a `token` event.

export class RequestError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function errorOf(response) {
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

const UNREACHABLE = 'The server cannot be reached. Is `handoff dev` running?';

export function uuid4() {
  // crypto.randomUUID needs a secure context; getRandomValues does not (LAN addresses).
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const chatPath = (chatId, rest = '') => `/api/chat/${chatId}${rest}`;
const POST_EMPTY = { method: 'POST', body: {} };
// A body that names an assistant, or none (the server's default).
const named = (assistantId) => (assistantId ? { assistantId } : {});

export class HandoffClient extends EventTarget {
  // `origin`: the server's, which every request and supabase-js's websocket URL
  // (/realtime/v1/websocket) are made from; `createClient`: supabase-js's, for Realtime.
  constructor({ origin, createClient }) {
    super();
    this.origin = origin;
    this.createClient = createClient;
    this.session = null;
    this.renewal = null;
    this.realtime = { client: null, key: null };
  }

  // The demo user's session: { token, userId, email, chatId, anonKey, assistantId }, the
  // last the deployment's default assistant.
  async signIn() {
    this.session = await this.api('/api/dev/session', { session: null });
    return this.session;
  }

  async api(path, { method = 'GET', body, signal, renew = true, session = this.session } = {}) {
    const headers = { Accept: 'application/json' };
    if (session) headers.Authorization = `Bearer ${session.token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let response;
    try {
      response = await fetch(`${this.origin}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (error) {
      if (error.name === 'AbortError') throw error;
      throw new RequestError(0, 'network', UNREACHABLE);
    }
    if (response.status === 401 && session && renew) {
      await errorOf(response);
      await this.renewSession();
      return this.api(path, { method, body, signal, renew: false, session });
    }
    if (!response.ok) throw await errorOf(response);
    return response.status === 204 ? null : response.json();
  }

  // The demo user's token is signed with the dev server's secret, which outlives a restart; a
  // server started with another data directory (or after its token expired) answers 401, and
  // the client asks for a new token once, then tries again, and hands it to Realtime. With
  // supabase-js signed in through Supabase Auth, the client refreshes its session itself.
  renewSession() {
    const session = this.session;
    // Every request that met the 401 meanwhile waits for the same answer.
    this.renewal =
      this.renewal ||
      this.api('/api/dev/session', { session: null })
        .then((fresh) => {
          session.token = fresh.token;
          session.anonKey = fresh.anonKey;
          this.dispatchEvent(new Event('token'));
        })
        .finally(() => {
          this.renewal = null;
        });
    return this.renewal;
  }

  // A turn's SSE stream (POST, Accept: text/event-stream): the response, once accepted. A 401
  // stored nothing: the token is renewed once and the same request sent again. Throws a
  // RequestError: status 0 when the server cannot be reached, else the server's error.
  async stream(path, body, signal) {
    const post = () =>
      fetch(`${this.origin}${path}`, {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${this.session.token}`,
          'Content-Type': 'application/json',
          Accept: 'text/event-stream',
        },
        body: JSON.stringify(body),
        signal,
      });
    let response;
    try {
      response = await post();
      if (response.status === 401) {
        await errorOf(response);
        await this.renewSession();
        response = await post();
      }
    } catch (error) {
      if (error.name === 'AbortError') throw error;
      throw new RequestError(0, 'network', UNREACHABLE);
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }

  // The user's message, `{ chatId, content, userMessageId, multitaskStrategy, assistantId? }`
  // (no assistantId: the chat's default, or the assistants the message @-mentions).
  respond(body, signal) {
    return this.stream('/api/chat/respond', body, signal);
  }

  // Another answer from the assistant that wrote `messageId` (none named: the default's).
  regenerate(chatId, messageId, signal, assistantId) {
    const path = chatPath(chatId, `/messages/${encodeURIComponent(messageId)}/regenerate`);
    return this.stream(path, named(assistantId), signal);
  }

  chats() {
    return this.api('/api/chats');
  }

  createChat() {
    return this.api('/api/chats', POST_EMPTY);
  }

  // The chat's history; `all`: every branch's messages, each marked `stale` when off its
  // assistant's active branch (what an edit, a regenerate or a cascade replaced among them).
  history(chatId, { all = false } = {}) {
    return this.api(chatPath(chatId, all ? '/history?all=true' : '/history'));
  }

  // Who is in the chat, `[{ userId, email, role, addedAt }]`, the owner first.
  async members(chatId) {
    return (await this.api(`/api/chats/${chatId}/members`)).members;
  }

  // Adds a user to the chat by e-mail (its owner only); the member.
  addMember(chatId, email) {
    return this.api(`/api/chats/${chatId}/members`, { method: 'POST', body: { email } });
  }

  // Removes a member (the owner), or the caller themself (leaving).
  removeMember(chatId, userId) {
    const path = `/api/chats/${chatId}/members/${encodeURIComponent(userId)}`;
    return this.api(path, { method: 'DELETE' });
  }

  // Answers an edit's cascade card: go on regenerating the replies that depend on it, or not.
  decideCascade(chatId, cascadeId, approved) {
    const path = chatPath(chatId, `/cascades/${encodeURIComponent(cascadeId)}/decision`);
    return this.api(path, { method: 'POST', body: { approved } });
  }

  // Stops a cascade before its next regeneration.
  cancelCascade(chatId, cascadeId) {
    const path = chatPath(chatId, `/cascades/${encodeURIComponent(cascadeId)}/cancel`);
    return this.api(path, POST_EMPTY);
  }

  // The deployment's assistants, `[{ id, name, description }]`, the default first.
  async assistants() {
    return (await this.api('/api/assistants')).assistants;
  }

  // The chat's assistants, each with `isDefault`, the earliest added first.
  async chatAssistants(chatId) {
    return (await this.api(`/api/chats/${chatId}/assistants`)).assistants;
  }

  // Adds an assistant to the chat; the chat's assistants after.
  async addChatAssistant(chatId, assistantId) {
    const body = { assistantId };
    return (await this.api(`/api/chats/${chatId}/assistants`, { method: 'POST', body })).assistants;
  }

  // Cancel, pause and resume act on the turn of `assistantId` (none: the default's).
  cancel(chatId, assistantId) {
    return this.api(chatPath(chatId, '/cancel'), { method: 'POST', body: named(assistantId) });
  }

  pause(chatId, assistantId) {
    return this.api(chatPath(chatId, '/pause'), { method: 'POST', body: named(assistantId) });
  }

  resume(chatId, instruction, assistantId) {
    const body = { ...named(assistantId), ...(instruction ? { instruction } : {}) };
    return this.api(chatPath(chatId, '/resume'), { method: 'POST', body });
  }

  approve(chatId, toolCallId, approved, note) {
    const body = note ? { approved, note } : { approved };
    const path = chatPath(chatId, `/approvals/${encodeURIComponent(toolCallId)}`);
    return this.api(path, { method: 'POST', body });
  }

  answer(chatId, questionId, answer) {
    const path = chatPath(chatId, `/answers/${encodeURIComponent(questionId)}`);
    return this.api(path, { method: 'POST', body: { answer } });
  }

  branches(chatId) {
    return this.api(chatPath(chatId, '/branches'));
  }

  activateBranch(chatId, branchId) {
    const path = chatPath(chatId, `/branches/${encodeURIComponent(branchId)}/activate`);
    return this.api(path, POST_EMPTY);
  }

  // A reply's timeline: `handoff dev` keeps the last turns' traces in memory.
  timeline(messageId) {
    return this.api(`/api/dev/messages/${encodeURIComponent(messageId)}/timeline`);
  }

  // One supabase-js client per project key, pointed at the server. The dev server's anon key is
  // signed with its secret, so a server started with another secret is another project: a new
  // client for it. The user's token goes through `accessToken`: otherwise supabase-js would send
  // Realtime the anon key in the user's place at each join and heartbeat, and RLS would show
  // nothing.
  supabase() {
    const session = this.session;
    if (this.realtime.client && this.realtime.key === session.anonKey) return this.realtime.client;
    const previous = this.realtime.client;
    this.realtime.client = this.createClient(this.origin, session.anonKey, {
      accessToken: async () => session.token,
    });
    this.realtime.key = session.anonKey;
    previous?.removeAllChannels().finally(() => previous.realtime.disconnect());
    return this.realtime.client;
  }

  // Whether a renewed session brought another project key (a new client, a new subscription).
  projectChanged() {
    return this.realtime.key !== this.session.anonKey;
  }
}
