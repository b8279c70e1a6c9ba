"""Process-wide resources, created lazily and once: settings and the database pool."""

from __future__ import annotations

import asyncio

from infra.db import Pool, PoolClosed, create_pool, reachable
from infra.settings import Settings


class DatabaseNotConfigured(RuntimeError):
    """DATABASE_URL is not set (and no embedded database was started)."""


class Services:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pool: Pool | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    async def pool(self) -> Pool:
        """The open pool; the first caller opens it (a cold Lambda pays this once)."""
        if self._pool is not None:
            return self._pool
        async with self._lock:
            # Closed as the process stops: opening a new pool would only wait again.
            if self._closed:
                raise PoolClosed("the process is stopping")
            if self._pool is None:
                if not self.settings.database_url:
                    raise DatabaseNotConfigured("DATABASE_URL is not set")
                pool = create_pool(
                    self.settings.database_url, max_size=self.settings.db_pool_max_size
                )
                await pool.open()
                self._pool = pool
        return self._pool

    async def close_connections(self) -> None:
        """Close the pool, but not for good: the next caller opens a new one (before a SnapStart
        snapshot, whose copies must not share a connection)."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def renew(self, settings: Settings) -> None:
        """Serve `settings` from now on; the pool made with the old ones closes."""
        await self.close_connections()
        self.settings = settings

    async def close(self) -> None:
        """Close the pool for good: callers waiting for a connection get PoolClosed at once,
        as does every later caller."""
        self._closed = True
        await self.close_connections()

    async def database_answers(self) -> bool:
        """Whether the database takes a new connection now (a probe, not the pool's)."""
        url = self.settings.database_url
        return url is not None and await reachable(url)
