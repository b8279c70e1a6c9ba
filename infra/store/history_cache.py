"""A process's decoded list channels, so a turn does not read its thread's whole chain again.

A list channel (`messages`, `tool_invocations`) is stored as a chain of deltas
(infra/store/checkpoints.py), so loading a thread's head reads and decodes one row per turn the
thread has had. Each turn's head is a delta on the head its run was seeded from, which the same
process usually loaded for the turn before: holding that value decoded, the next load reads the
head row alone and decodes only what the last turn added.

What it holds: for a thread, the decoded value of a list channel at the versions the thread's
last load read (the base its head's delta names, and the head's own), keyed by thread,
namespace, channel and version. A stored version's value never changes (the saver writes a
version once, and LangGraph's versions carry a random part), so an entry is only served when a
checkpoint row just read from the database names its version: the database stays the one judge
of what exists.

For how long: an entry is dropped `TTL_S` after it was last used, when the process holds more
than `MAX_ITEMS` items (the least recently used first), when the thread's next load finds no
checkpoint (the chat was deleted), and at the thread's next load for every version that load
does not read (erasure cuts checkpoints and the blobs only they read; what it cut is dropped
there). An erased message is never served from it: every version whose value holds it loses
its checkpoints, and a version that no checkpoint names is never asked for.

The cached lists share their items with what a load returns: only a reader that copies them on
(`load_latest_into_memory`, which encodes them into the in-memory saver) may use a cache.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

TTL_S = 120.0  # seconds an entry lives after its last use
MAX_ITEMS = 20_000  # list items held in all, over every thread (a few MB of messages)

Key = tuple[str, str, str, str]  # thread, namespace, channel, version


@dataclass(frozen=True)
class _Entry:
    items: tuple[Any, ...]
    used: float


class HistoryCache:
    """Decoded list channel values by thread and version, bounded in items and time."""

    def __init__(
        self,
        *,
        ttl_s: float = TTL_S,
        max_items: int = MAX_ITEMS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s, self.max_items, self._clock = ttl_s, max_items, clock
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        self._items = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def items(self) -> int:
        """How many list items the cache holds."""
        return self._items

    def get(self, key: Key) -> tuple[Any, ...] | None:
        """The value at `key`, if held and not expired."""
        self._expire()
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries[key] = _Entry(entry.items, self._clock())
        self._entries.move_to_end(key)
        return entry.items

    def put(self, key: Key, items: Sequence[Any]) -> None:
        """Hold `items` as the value at `key`; a value longer than the bound is not held."""
        self._expire()
        if len(items) > self.max_items:
            return
        self._drop(key)
        self._entries[key] = _Entry(tuple(items), self._clock())
        self._items += len(items)
        while self._items > self.max_items:
            self._drop(next(iter(self._entries)))

    def held(self, thread_id: str) -> dict[Key, tuple[Any, ...]]:
        """What the cache holds of the thread, by key."""
        return {k: e.items for k, e in self._entries.items() if k[0] == thread_id}

    def keep_only(self, thread_id: str, keys: Sequence[Key] = ()) -> None:
        """Drop the thread's entries but `keys` (all of them when none are named)."""
        kept = set(keys)
        for key in [k for k in self._entries if k[0] == thread_id and k not in kept]:
            self._drop(key)

    def _expire(self) -> None:
        oldest = self._clock() - self.ttl_s
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if entry.used > oldest:
                return
            self._drop(key)

    def _drop(self, key: Key) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._items -= len(entry.items)


# The one a process's turns share (turns/engine.py).
HISTORY = HistoryCache()
