// The client a frontend makes once: the API's URL, a supabase-js client (for Realtime) and a way
// to get the user's access token. It opens chats to follow and answers every route.

import { ChatSession } from './chat.js';
import { ChatFeed, type FeedModel, type FeedOptions, type RealtimeHost } from './feed.js';
import { type AccessToken, Http } from './http.js';
import { Routes } from './routes.js';

export interface HandoffClientOptions {
  /** The API's origin, e.g. `https://api.example.com` (no trailing path). */
  url: string;
  /** A supabase-js client of the project: the package joins its Realtime channels. */
  supabase: RealtimeHost;
  /** The user's access token; called with `{ refresh: true }` once the last was refused. */
  accessToken: AccessToken;
  /** A fetch of your own (tests, proxies). */
  fetch?: typeof fetch;
  /** How long a followed reply waits for a server that cannot be reached before it ends with
   * a `server_gone` HandoffError (default 15 s). */
  serverGoneAfterMs?: number;
  /** How often the history is polled while the channel is down (default 1.5 s). */
  pollMs?: number;
}

export interface ChatOptions {
  /** Every branch's history (`?all=true`): the stale messages something replaced too. */
  allBranches?: boolean;
}

export class HandoffClient extends Routes {
  private readonly supabase: RealtimeHost;
  private readonly feedOptions: FeedOptions;
  private readonly open = new Map<string, ChatSession>();

  constructor(options: HandoffClientOptions) {
    const http = new Http(options.url, options.accessToken, options.fetch);
    super(http);
    this.supabase = options.supabase;
    this.feedOptions = {
      pollMs: options.pollMs ?? 1500,
      rejoinMs: 1000,
      serverGoneAfterMs: options.serverGoneAfterMs ?? 15_000,
    };
  }

  /** The chat, followed live (the same session while it is open): send, follow, control.
   * `allBranches`: its snapshot holds every branch's messages, the stale ones too (marked
   * `stale`, with `replacedBy`), as the chat is opened. */
  chat(chatId: string, options: ChatOptions = {}): ChatSession {
    let session = this.open.get(chatId);
    if (!session) {
      session = new ChatSession(this.http, this.supabase, chatId, { ...this.feedOptions, ...options });
      const close = session.close.bind(session);
      session.close = () => {
        this.open.delete(chatId);
        return close();
      };
      this.open.set(chatId, session);
    }
    return session;
  }

  /** The chat's live feed alone, into a model of the frontend's own (one that keeps more than
   * a ChatSession does, or shows messages its own way): it loads the history, follows the
   * channel and polls as a ChatSession's does; `close` it when done. */
  feed(chatId: string, model: FeedModel, options: ChatOptions = {}): ChatFeed {
    return new ChatFeed(this.http, this.supabase, chatId, model, { ...this.feedOptions, ...options });
  }

  /** Stops following every chat. */
  async close(): Promise<void> {
    await Promise.all([...this.open.values()].map((session) => session.close()));
  }
}

export function createHandoffClient(options: HandoffClientOptions): HandoffClient {
  return new HandoffClient(options);
}
