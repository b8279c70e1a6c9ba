"""Process-wide resources, created lazily and once: settings and the database pool."""

from __future__ import annotations

import asyncio

from infra.db import Pool, create_pool
from infra.settings import Settings


class DatabaseNotConfigured(RuntimeError):
    """DATABASE_URL is not set (and no embedded database was started)."""


class Services:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pool: Pool | None = None
        self._lock = asyncio.Lock()

    async def pool(self) -> Pool:
        """The open pool; the first caller opens it (a cold Lambda pays this once)."""
        if self._pool is not None:
            return self._pool
        async with self._lock:
            if self._pool is None:
                if not self.settings.database_url:
                    raise DatabaseNotConfigured("DATABASE_URL is not set")
                pool = create_pool(
                    self.settings.database_url, max_size=self.settings.db_pool_max_size
                )
                await pool.open()
                self._pool = pool
        return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
