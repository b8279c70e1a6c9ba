"""Supabase Realtime for development: the dev server speaks Realtime's websocket protocol at
/realtime/v1/websocket, so supabase-js and supabase-py connect to it unchanged
(`createClient(origin, anonKey).channel(...)`, `acreate_client(...).channel(...)`).

What it reproduces:

- The socket: `apikey` (query or `x-api-key` header) checked at the handshake (401 with
  Realtime's words), Phoenix's V1 JSON serializer (`vsn=1.0.0`, supabase-py) and Realtime's V2
  array and binary serializer (`vsn=2.0.0`, supabase-js), heartbeats on `phoenix`. A frame the
  serializer cannot read (not JSON, as NaN or a lone surrogate are not; not UTF-8; cut short;
  not the serializer's shape) ends the socket, as it ends Phoenix's; here with a close frame
  (1002) that says why.
- Channels per socket: at most 100, Realtime's default `max_channels_per_client`; a join past
  it is refused with `ChannelRateLimitReached: Too many channels`, and a leave makes room.
- Channels: `phx_join` with the channel's `config` and `access_token` (else the socket's key);
  the reply carries each `postgres_changes` binding with its id; a token Realtime would refuse,
  a missing topic, a private channel the subscriber's RLS does not let them read, and replay are
  join errors in Realtime's words; `access_token` events change a joined channel's token (a
  refused one, or one whose policies no longer let it read, ends the channel with a `system`
  error, as does an expired token at its expiry); `phx_leave` replies and closes; a second join
  of a topic closes the first.
- Postgres Changes from the dev change feed (logical decoding of `supabase_realtime`):
  INSERTs and UPDATEs of published tables, filters `eq`, `neq` and `in` (with `not.`) evaluated
  on the WAL's values, `select`, each row looked up by its key under the subscriber's role and
  claims (RLS) before it is sent, in Realtime's payload (`{ids, data: {schema, table,
  commit_timestamp, type, columns, record, old_record, errors}}`, an unchanged TOASTed value left
  out as Realtime leaves it out). A binding Realtime would refuse (a table not in the
  publication, an unknown column, a value of the wrong type, a malformed filter) gets its
  `system` error after the join; a good one `Subscribed to PostgreSQL`.
- Broadcast: client broadcasts (`self`, `ack`) on public channels; on private ones only when
  the RLS policies on `realtime.messages` let the subscriber write, and joined only when they
  let it read (probe rows, as Realtime checks); Broadcast from Database: every committed insert
  of `realtime.messages` (realtime.send) to the subscribers of its topic and privacy, as a
  binary user broadcast to V2 clients and JSON to V1 clients, `meta.id` the row's id. A V2
  client's binary push is sent on without its metadata, as Realtime sends it on. A broadcast a
  serializer cannot carry (a binary frame holds 255 bytes of topic and of event) is dropped for
  that serializer's subscribers alone, who keep their channels.

What it does not reproduce: Presence (a `presence` push is answered with an error, nothing is
tracked), broadcast replay, the HTTP broadcast API, DELETE and TRUNCATE events, filter
operators other than eq, neq and in, binary broadcast payloads (such a push is ignored), `sb_`
API keys (a key must be a JWT), frames nested past 64 levels (Realtime's parser reads any
depth; here such a frame ends the socket), json values in a row nested past about 1000
levels (Postgres stores them, Realtime sends them; here that row's change is dropped, with a
log line, for every subscriber), rate limits and quotas other than channels per
socket (joins and events per second, concurrent users, payload size), and Realtime's tenants,
clustering and reconnection of the feed (a lost feed is a `system` error; a client that rejoins
gets a working one). Row changes are
polled every 100 ms, as Realtime polls them; broadcasts are decoded as soon as the migrations'
realtime.send notifies, as Realtime streams them.

The modules: endpoint (the handshake), socket (one connection's session), joins and bindings
(a join's payload and its Postgres Changes bindings, read without I/O), hub (every channel, the
change feed's listener), channels (one channel's delivery and token), postgres_changes (the
bindings' checks, RLS and payloads), authorization, tokens, protocol (the serializers).
"""

from devkit.realtime.endpoint import REALTIME_PATH, install_realtime, realtime_hub

__all__ = ["REALTIME_PATH", "install_realtime", "realtime_hub"]
