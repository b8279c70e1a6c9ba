// A chat followed live: its `message` rows as Postgres Changes and its drafts (as
// `message_draft` changes or `draft` broadcasts, whichever DRAFT_TRANSPORT the deployment uses:
// both are listened to) on the chat's private channel `chat:<id>` (docs/realtime.md), on top of
// the stored history. The history is loaded again whenever changes may have been missed: once
// subscribed, at a draft seq gap, after the channel was lost or its token expired; and polled
// while the channel is down. A server that stays unreachable past `serverGoneAfterMs` is said
// to those following (`onGone`), who end with a typed error rather than wait for ever. An
// edit's cascade is not on the channel (only its messages are): while one may be under way, the
// history, which lists its cards, is polled until a card waits or the chat is quiet. A database
// Realtime cannot follow (no logical decoding) is said once (`unavailable`, with the server's
// words), and the history is polled instead, with no rejoining. What the feed observes goes into
// a model: the package's ChatState, or a frontend's own with the same methods.
import { gone } from './errors.js';
import { isLive } from './types.js';
const TOKEN_PROBLEM = /expired|JWT|token/i;
// Realtime's word that the database cannot be followed: it will not learn to, so no rejoining.
const UNAVAILABLE = /wal_level|logical decoding|logical replication/i;
// History loads in a row, with no reply running and nothing changed, after which a cascade
// watch ends: a cascade starts its next regeneration or asks within a step's round trip.
const QUIET_LOADS = 3;
/** A row that says an edit's cascade may be under way: a message replaced, or left as it was. */
const cascading = (change) => change.kind === 'row' && Boolean(change.row.metadata?.replacedBy || change.row.metadata?.cascade);
export class ChatFeed {
    http;
    supabase;
    chatId;
    state;
    options;
    status = 'connecting';
    /** Why Realtime cannot follow the database (status `unavailable`), in the server's words. */
    unavailable = null;
    closed = false;
    buffered = [];
    catchingUp = false;
    channel = null;
    joining = Promise.resolve();
    generation = 0;
    lastContact = Date.now();
    listeners = new Set();
    poller;
    stopTokens;
    loaded;
    markLoaded;
    watch = null;
    constructor(http, supabase, chatId, state, options) {
        this.http = http;
        this.supabase = supabase;
        this.chatId = chatId;
        this.state = state;
        this.options = options;
        this.loaded = new Promise((resolve) => (this.markLoaded = resolve));
        this.poller = setInterval(() => this.poll(), options.pollMs);
        this.stopTokens = http.onToken((token) => {
            if (!this.closed)
                this.supabase.realtime.setAuth(token).catch(() => { });
        });
        this.subscribe();
    }
    /** Resolves once the history was loaded the first time (live or not). */
    ready() {
        return this.loaded;
    }
    listen(listener) {
        this.listeners.add(listener);
        return () => this.listeners.delete(listener);
    }
    async close() {
        this.closed = true;
        clearInterval(this.poller);
        if (this.watch?.timer)
            clearTimeout(this.watch.timer);
        this.watch = null;
        this.stopTokens();
        await this.leave();
    }
    /** The history again, then the changes held back meanwhile. */
    async refresh() {
        const all = this.options.allBranches ? '?all=true' : '';
        const history = await this.http.json(`/api/chat/${this.chatId}/history${all}`);
        if (this.closed)
            return;
        this.lastContact = Date.now();
        this.state.history(history.messages, history.pendingCascades ?? []);
        const held = this.buffered ?? [];
        this.buffered = null;
        for (const change of held)
            this.apply(change, false);
        this.emit(this.state.list());
        for (const listener of this.listeners)
            listener.loaded?.();
        this.markLoaded();
    }
    /** Polls the history while an edit's cascade may be under way (its cards are not on the
     * channel): until a card waits, or the chat has stayed quiet for QUIET_LOADS loads. */
    watchCascades() {
        if (this.closed)
            return;
        if (this.watch) {
            this.watch.quiet = 0;
            return;
        }
        const watch = { timer: null, quiet: 0, seen: '' };
        this.watch = watch;
        const tick = async () => {
            await this.refresh().catch(() => { });
            if (this.watch !== watch)
                return;
            const messages = this.state.list();
            const now = JSON.stringify(messages.map((m) => [m.id, m.status, m.replacedBy, m.cascade]));
            const busy = now !== watch.seen || messages.some((m) => m.role === 'assistant' && isLive(m.status));
            watch.seen = now;
            watch.quiet = busy ? 0 : watch.quiet + 1;
            if (this.state.cascades.length || watch.quiet >= QUIET_LOADS)
                this.watch = null;
            else
                watch.timer = setTimeout(tick, this.options.pollMs);
        };
        watch.timer = setTimeout(tick, this.options.pollMs);
    }
    emit(messages) {
        if (!messages.length)
            return;
        for (const listener of this.listeners)
            listener.changed(messages);
    }
    setStatus(status) {
        this.status = status;
        const detail = status === 'unavailable' ? (this.unavailable ?? undefined) : undefined;
        for (const listener of this.listeners)
            listener.status?.(status, detail);
    }
    failed(error) {
        this.flushOnFailure();
        if (this.closed)
            return;
        for (const listener of this.listeners)
            listener.failed?.(error);
    }
    receive(change) {
        if (this.closed)
            return;
        if (this.buffered)
            this.buffered.push(change);
        else
            this.apply(change, true);
    }
    apply(change, live) {
        if (live && cascading(change))
            this.watchCascades();
        const changed = change.kind === 'row' ? this.state.row(change.row) : this.state.draft(change.change);
        if (changed === 'gap') {
            if (live)
                this.catchUp();
            return;
        }
        if (changed && live)
            this.emit([this.state.get(changed.id) ?? changed]);
    }
    catchUp() {
        if (this.catchingUp || this.buffered || this.closed)
            return;
        this.catchingUp = true;
        this.buffered = [];
        this.refresh()
            .catch((error) => this.failed(error))
            .finally(() => (this.catchingUp = false));
    }
    flushOnFailure() {
        // Changes held back for a history that did not come are not held for ever.
        const held = this.buffered ?? [];
        this.buffered = null;
        for (const change of held)
            this.apply(change, true);
    }
    poll() {
        if (this.closed || this.status === 'live' || this.catchingUp)
            return;
        this.refresh().catch((error) => this.failed(error));
        const silentFor = Date.now() - this.lastContact;
        if (silentFor > this.options.serverGoneAfterMs) {
            const error = gone(`no answer for ${Math.round(silentFor / 1000)} s`);
            for (const listener of this.listeners)
                listener.gone?.(error);
        }
    }
    down() {
        if (this.closed)
            return;
        this.setStatus('down');
        this.buffered = null;
    }
    /** Realtime said it cannot follow this database: polled from now on, never rejoined. */
    unfollowable(message) {
        if (this.closed)
            return;
        this.unavailable = message;
        this.setStatus('unavailable');
        this.buffered = null;
        this.refresh().catch((error) => this.failed(error));
    }
    async leave() {
        await this.joining.catch(() => { });
        const channel = this.channel;
        this.channel = null;
        if (channel)
            await this.supabase.removeChannel(channel).catch(() => { });
    }
    rejoinLater(generation, refreshToken) {
        setTimeout(async () => {
            if (this.closed || generation !== this.generation)
                return;
            if (refreshToken)
                await this.http.token(true).catch(() => { });
            await this.leave();
            if (!this.closed && generation === this.generation)
                this.subscribe();
        }, this.options.rejoinMs);
    }
    subscribe() {
        const generation = ++this.generation;
        this.buffered = [];
        this.setStatus('connecting');
        this.joining = this.join(generation).catch(() => {
            this.down();
            this.rejoinLater(generation, false);
        });
    }
    async join(generation) {
        // The token first: the join carries it, so the channel is the user's from its first change.
        await this.supabase.realtime.setAuth(await this.http.token());
        if (this.closed || generation !== this.generation)
            return;
        const filter = `chat_id=eq.${this.chatId}`;
        const draftRow = (row) => ({
            messageId: row.message_id,
            seq: row.seq,
            after: null,
            text: row.draft_content,
        });
        this.channel = this.supabase
            .channel(`chat:${this.chatId}`, { config: { private: true } })
            .on('postgres_changes', { event: '*', schema: 'public', table: 'message', filter }, (p) => {
            if (p.new && 'id' in p.new)
                this.receive({ kind: 'row', row: p.new });
        })
            .on('postgres_changes', { event: '*', schema: 'public', table: 'message_draft', filter }, (p) => {
            if (p.new && 'message_id' in p.new)
                this.receive({ kind: 'draft', change: draftRow(p.new) });
        })
            .on('broadcast', { event: 'draft' }, (message) => {
            const d = message.payload;
            if (d && typeof d.messageId === 'string' && typeof d.seq === 'number') {
                this.receive({ kind: 'draft', change: { after: null, text: '', ...d } });
            }
        })
            .on('system', {}, (payload) => {
            if (generation !== this.generation || payload.status !== 'error')
                return;
            const message = payload.message ?? '';
            if (payload.extension === 'postgres_changes' && UNAVAILABLE.test(message)) {
                this.unfollowable(message);
                return;
            }
            // The channel was ended (its token expired, the feed dropped it): changes may be
            // missing; a new join, with a fresh token when it was the token, and the history.
            this.down();
            this.rejoinLater(generation, TOKEN_PROBLEM.test(message));
        })
            .subscribe((status, error) => this.onSubscribe(generation, status, error));
    }
    onSubscribe(generation, status, error) {
        if (this.closed || generation !== this.generation)
            return;
        if (status === 'SUBSCRIBED') {
            this.lastContact = Date.now();
            // Still unfollowable after a rejoin (supabase-js rejoins a socket it lost): the server
            // says so again after the join, and the history stays polled meanwhile.
            if (this.unavailable === null)
                this.setStatus('live');
            // Subscribed first, history second: nothing that happens in between is missed.
            this.buffered = this.buffered ?? [];
            this.refresh().catch((failure) => {
                this.failed(failure);
                this.markLoaded();
            });
        }
        else if (this.unavailable !== null) {
            // The channel carries nothing here: the polling goes on, no rejoin.
            return;
        }
        else if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') {
            // The socket is gone (supabase-js reconnects and rejoins), or the join was refused.
            this.down();
            if (error && TOKEN_PROBLEM.test(error.message))
                this.http.token(true).catch(() => { });
        }
        else if (status === 'CLOSED') {
            this.down();
            this.rejoinLater(generation, false);
        }
    }
}
