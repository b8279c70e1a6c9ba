// The dev server's session, as the page holds it: the demo user's token, or another local
// user's (GET /api/dev/session, with `?as=<email>`; asked for again when the server refuses
// it), supabase-js's client per project key, and the JavaScript client (clients/js, whose build
// is ../client/) made with them, through which every route goes. It knows nothing of the page (no DOM), and says when it renewed the token with a
// `token` event.

import { HandoffClient, HandoffError } from '../client/index.js';

const UNREACHABLE = 'The server cannot be reached. Is `handoff dev` running?';

// An error of the page's own session route, as the package words the others.
async function refusal(response) {
  let code = `http_${response.status}`;
  let message = `The server answered ${response.status} ${response.statusText}.`.trim();
  try {
    const body = await response.json();
    code = body?.error?.code || code;
    message = body?.error?.message || message;
  } catch {
    // Not JSON: keep the status line.
  }
  return new HandoffError(response.status, code, message);
}

export class DevConnection extends EventTarget {
  // `origin`: the server's, which every request and supabase-js's websocket URL
  // (/realtime/v1/websocket) are made from; `createClient`: supabase-js's, for Realtime;
  // `as`: the e-mail of the local user to be instead of the demo user (the dev server makes
  // them on first use), or nothing.
  constructor({ origin, createClient, as = null }) {
    super();
    this.origin = origin;
    this.createClient = createClient;
    this.as = as;
    this.session = null;
    this.realtime = { client: null, key: null };
    const connection = this;
    // The package's client. Its token is the session's; a refused one is renewed here. Its
    // Realtime is whichever supabase-js client the session's project key has now.
    this.api = new HandoffClient({
      url: origin,
      accessToken: ({ refresh }) => (refresh ? this.renewed() : this.session.token),
      supabase: {
        channel: (...args) => connection.supabase().channel(...args),
        removeChannel: (channel) => connection.supabase().removeChannel(channel),
        get realtime() {
          return connection.supabase().realtime;
        },
      },
    });
  }

  // The demo user's session, or the `as` user's: { token, userId, email, chatId, anonKey,
  // assistantId }, the last the deployment's default assistant.
  async signIn() {
    this.session = await this.fetchSession();
    return this.session;
  }

  async fetchSession() {
    let response;
    try {
      const as = this.as ? `?as=${encodeURIComponent(this.as)}` : '';
      response = await fetch(`${this.origin}/api/dev/session${as}`, {
        headers: { Accept: 'application/json' },
      });
    } catch {
      throw new HandoffError(0, 'network', UNREACHABLE);
    }
    if (!response.ok) throw await refusal(response);
    return response.json();
  }

  // The demo user's token is signed with the dev server's secret, which outlives a restart; a
  // server started with another data directory (or after its token expired) answers 401, and
  // the package asks for a fresh token once (here), then tries again. With supabase-js signed
  // in through Supabase Auth, the access token callback would refresh its session instead.
  async renewed() {
    const fresh = await this.fetchSession();
    this.session.token = fresh.token;
    this.session.anonKey = fresh.anonKey;
    this.dispatchEvent(new Event('token'));
    return fresh.token;
  }

  // A reply's timeline: `handoff dev` keeps the last turns' traces in memory.
  timeline(messageId) {
    return this.api.http.json(`/api/dev/messages/${encodeURIComponent(messageId)}/timeline`);
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
}
