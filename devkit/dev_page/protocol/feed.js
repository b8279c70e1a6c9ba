// A chat followed live: its `message` and `message_draft` rows through Supabase Realtime on the
// chat's private channel (supabase-js, subscribed as docs/realtime.md tells a production
// frontend to; the dev server speaks Realtime's protocol), on top of the stored history, which
// it loads again whenever changes may have been missed (a join, a draft seq gap, a lost
// channel) and polls while the feed is down. It knows nothing of the page: what it observes goes
// to the `view` it is given:
//
//   history(rows, body) the stored messages, the base the changes apply on; `body` is the
//                      whole answer (its `pendingCascades`: the cards waiting for the editor)
//   changes(payloads)  the changes held back while the history loaded, to apply on top of it
//   change(payload)    one change, live
//   status(kind, text) 'connecting', 'live' or 'down', and the words for it
//   banner(text)       what went wrong with the feed ('' once it is fine)
//   failed(error)      a history load that failed
//   lastDraftSeq(id)   the seq of the newest draft shown for a message (-1: none, or unknown)
//   replyRunning()     whether a reply of the chat still runs (polled without a feed only then)

// Realtime's word that the database cannot be followed (no logical decoding): it will not learn
// to, so the history is polled instead of rejoining.
const UNAVAILABLE = /wal_level|logical decoding|logical replication/i;
// While the feed is down the history is polled: while a reply runs, and while the server is
// away (whose 401, after a restart with a new secret, brings a new token and key, and with them
// a new subscription).
const POLL_MS = 1500;
const REJOIN_MS = 1000;

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

export class ChatFeed {
  // `all`: the history of every branch (the stale messages too), rather than the active ones'.
  constructor(client, chatId, view, { all = false } = {}) {
    this.client = client;
    this.chatId = chatId;
    this.view = view;
    this.all = all;
    this.closed = false;
    // Subscribed: changes arrive live.
    this.up = false;
    // Realtime cannot follow this database (no logical decoding): no rejoining.
    this.off = false;
    // Changes that arrived while the history loads: applied on top of it.
    this.buffered = null;
    this.catchingUp = false;
    // The subscription: { client, joining, left } (joining: its channel, once made).
    this.subscription = null;
    this.onToken = () => this.tokenRenewed();
    client.addEventListener('token', this.onToken);
    this.poller = setInterval(() => this.poll(), POLL_MS);
  }

  // Subscribes, once `after` (the previous chat's leave) is done.
  open(after = Promise.resolve()) {
    this.subscription = this.subscribe(after);
  }

  // Stops following; resolves once the channel is left.
  close() {
    this.closed = true;
    clearInterval(this.poller);
    this.client.removeEventListener('token', this.onToken);
    const left = unsubscribe(this.subscription);
    this.subscription = null;
    return left;
  }

  // The stored history, then the changes held back meanwhile.
  async refresh() {
    let body;
    try {
      body = await this.client.history(this.chatId, { all: this.all });
    } catch (error) {
      // Changes held back for the history are not held for ever.
      if (!this.closed) this.flush();
      throw error;
    }
    if (this.closed) return;
    this.view.history(body.messages, body);
    this.flush();
  }

  flush() {
    const buffered = this.buffered || [];
    this.buffered = null;
    this.view.changes(buffered);
  }

  receive(payload) {
    if (this.buffered) {
      this.buffered.push(payload);
      return;
    }
    this.view.change(payload);
  }

  // A draft whose seq skips one of the message's means changes were missed (a dropped frame, a
  // subscriber Realtime cut off): the history has them all.
  receiveDraft(payload) {
    const row = payload.new;
    const last = row && !this.buffered ? this.view.lastDraftSeq(row.message_id) : -1;
    const gap = last > 0 && row.seq > last + 1;
    this.receive(payload);
    if (gap) this.catchUp();
  }

  catchUp() {
    if (this.catchingUp || this.buffered || this.closed) return;
    this.catchingUp = true;
    this.buffered = [];
    this.refresh()
      .catch((error) => this.view.failed(error))
      .finally(() => {
        this.catchingUp = false;
      });
  }

  poll() {
    if (this.closed || this.up || this.buffered) return;
    if (this.off && !this.view.replyRunning()) return;
    this.refresh().catch(this.off ? () => {} : (error) => this.view.failed(error));
  }

  // Until the feed is back, the stored history (and polled, see poll).
  down(text, banner) {
    this.up = false;
    this.view.status('down', text);
    if (banner) this.view.banner(banner);
    this.buffered = null;
    this.refresh().catch((error) => this.view.failed(error));
  }

  current(subscription) {
    return !this.closed && this.subscription === subscription;
  }

  resubscribe() {
    this.subscription = this.subscribe(unsubscribe(this.subscription));
  }

  rejoinLater(subscription) {
    setTimeout(() => {
      if (this.current(subscription)) this.resubscribe();
    }, REJOIN_MS);
  }

  // A renewed token: to the channel, or, for a new project key, a new client and subscription.
  tokenRenewed() {
    if (this.closed) return;
    if (this.client.projectChanged()) {
      this.resubscribe();
      return;
    }
    this.client.supabase().realtime.setAuth(this.client.session.token).catch(() => {});
  }

  // The chat's subscription, once `after` is done: returned at once.
  subscribe(after) {
    this.buffered = [];
    this.up = false;
    this.off = false;
    this.view.status('connecting', 'Connecting…');
    const session = this.client.session;
    const client = this.client.supabase();
    const subscription = { client, joining: null, left: null };
    const filter = `chat_id=eq.${this.chatId}`;
    subscription.joining = after
      // The token first: the join carries it, so the channel is the user's from its first change.
      .then(() => client.realtime.setAuth(session.token))
      .then(() => {
        if (!this.current(subscription)) return null;
        return client
          // Private: joined only when the policies on realtime.messages let the user read it.
          .channel(`chat:${this.chatId}`, { config: { private: true } })
          // (A wrapper: supabase-js passes more arguments than the payload.)
          .on(
            'postgres_changes',
            { event: '*', schema: 'public', table: 'message', filter },
            (payload) => this.receive(payload),
          )
          .on(
            'postgres_changes',
            { event: '*', schema: 'public', table: 'message_draft', filter },
            (payload) => this.receiveDraft(payload),
          )
          .on('system', {}, (payload) => this.onSystem(subscription, payload))
          .subscribe((status, error) => this.onSubscribe(subscription, status, error));
      });
    return subscription;
  }

  onSystem(subscription, payload) {
    if (!this.current(subscription) || payload.status !== 'error') return;
    if (payload.extension === 'postgres_changes' && UNAVAILABLE.test(payload.message)) {
      this.off = true;
      this.down('No live updates', `Live updates are off: ${payload.message}`);
      return;
    }
    // The feed dropped this channel (it fell behind, or lost its slot), or its token ended:
    // changes may be missing; the history has them, and a new join gets a working feed (with a
    // new token, when it was the token).
    this.down('Reconnecting…');
    const rejoin = () => this.rejoinLater(subscription);
    if (/expired|JWT|token/i.test(payload.message)) {
      this.client.renewSession().then(rejoin, rejoin);
    } else {
      rejoin();
    }
  }

  onSubscribe(subscription, status, error) {
    if (!this.current(subscription)) return;
    if (status === 'SUBSCRIBED') {
      this.up = true;
      this.off = false;
      this.view.status('live', 'Live');
      this.view.banner('');
      // Subscribed first, history second: nothing that happens in between is missed.
      this.buffered = this.buffered || [];
      this.refresh().catch((failure) => this.view.failed(failure));
    } else if (status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') {
      if (this.off) return;
      // The socket is gone (supabase-js reconnects it and rejoins), or the join was refused: a
      // token the server does not take is renewed; the rejoin carries it.
      this.down('Reconnecting…');
      if (error && /JWT|token/i.test(error.message)) this.client.renewSession().catch(() => {});
    } else if (status === 'CLOSED') {
      // Closed by the server (the page's own leave makes it no longer current): rejoin.
      this.down('Reconnecting…');
      this.rejoinLater(subscription);
    }
  }
}
