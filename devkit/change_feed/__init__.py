"""The development change feed: the WAL that Supabase Realtime reads, without Realtime.

Realtime reads the WAL of the tables in the `supabase_realtime` publication through a logical
replication slot and sends each subscriber the row changes its RLS lets it see; it reads the
inserts into `realtime.messages` (Broadcast from Database: realtime.send) through a publication of
their own. Locally there is no Realtime server, so `ChangeFeed` decodes both for one app process:
one temporary pgoutput slot (the server drops it with the connection, so a dead dev server
retains no WAL), polled about every 100 ms as Realtime polls Postgres Changes, and at once when
a transaction that called the migrations' realtime.send commits (its notification stands in for
Realtime's replication stream). Every batch goes, in commit order, to each listener: the
Realtime endpoint (devkit/realtime/) and the SSE route's subscriptions.

The package's modules: `feed` (the slot and its polling: the I/O), `subscription` (one chat's
changes for the SSE route, devkit/changes.py), `errors`; the decoding is devkit/pgoutput/'s.

A change is checked when the subscriber reads it, by looking its row up by primary key under the
subscriber's RLS, as Realtime checks it (by primary key, when it reads the slot). So a row deleted
before the check (a draft its reply's completion removed) is not delivered, nor is one whose chat
is no longer the subscriber's.

Not reproduced: a row holding json nested past about 1000 levels (what json.loads reads) is
not delivered; that row's change is dropped, with a log line, and the feed goes on.
"""

from devkit.change_feed.errors import (
    ChangeFeedClosed,
    ChangeFeedError,
    ChangeFeedLost,
    ChangeFeedUnavailable,
    SubscriberOverflow,
)
from devkit.change_feed.feed import (
    MESSAGES_PUBLICATION,
    PUBLICATION,
    WAL_LEVEL_SQL,
    ChangeFeed,
    FeedListener,
    create_slot,
)
from devkit.change_feed.subscription import Subscription

__all__ = [
    "MESSAGES_PUBLICATION",
    "PUBLICATION",
    "WAL_LEVEL_SQL",
    "ChangeFeed",
    "ChangeFeedClosed",
    "ChangeFeedError",
    "ChangeFeedLost",
    "ChangeFeedUnavailable",
    "FeedListener",
    "SubscriberOverflow",
    "Subscription",
    "create_slot",
]
