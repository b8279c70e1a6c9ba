// The client a frontend makes once: the API's URL, a supabase-js client (for Realtime) and a way
// to get the user's access token. It opens chats to follow and answers every route.
import { ChatSession } from './chat.js';
import { ChatFeed } from './feed.js';
import { Http } from './http.js';
import { Routes } from './routes.js';
export class HandoffClient extends Routes {
    supabase;
    feedOptions;
    open = new Map();
    constructor(options) {
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
    chat(chatId, options = {}) {
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
    feed(chatId, model, options = {}) {
        return new ChatFeed(this.http, this.supabase, chatId, model, { ...this.feedOptions, ...options });
    }
    /** Stops following every chat. */
    async close() {
        await Promise.all([...this.open.values()].map((session) => session.close()));
    }
}
export function createHandoffClient(options) {
    return new HandoffClient(options);
}
