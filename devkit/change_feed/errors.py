"""What ends a change feed's delivery to a listener."""


class ChangeFeedError(RuntimeError):
    """The change feed cannot deliver (any more) changes to a subscriber."""


class ChangeFeedUnavailable(ChangeFeedError):
    """The database cannot decode its WAL logically (wal_level, privileges, slots)."""


class SubscriberOverflow(ChangeFeedError):
    """The subscriber fell too far behind and was dropped."""


class ChangeFeedLost(ChangeFeedError):
    """The feed's connection or decoding failed; the subscriber may have missed changes."""


class ChangeFeedClosed(ChangeFeedError):
    """The app is shutting down."""
