"""The dev data directory: what `handoff dev` keeps from one start to the next.

    <dir>/postgres     the embedded Postgres (when DATABASE_URL is not set)
    <dir>/jwt-secret   the secret the demo user's tokens are signed with, so that a token
                       (an open chat page's, a printed curl command's) outlives a restart

Under the system's temporary directory by default, not a home directory: run as root, the
embedded server runs as a system user that must be able to traverse every parent of its data.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path


def default_dev_dir() -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"handoff-dev-{uid}"


@dataclass(frozen=True)
class DevHome:
    root: Path

    @property
    def postgres(self) -> Path:
        return self.root / "postgres"

    @property
    def secret_file(self) -> Path:
        return self.root / "jwt-secret"

    def jwt_secret(self) -> str:
        """The stored secret, made on first use (readable by this user only)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            return self._read()
        # Written aside, then linked into place: two servers starting at once agree on one
        # secret, and neither ever reads half of it.
        fd, staging = tempfile.mkstemp(dir=self.root, prefix=".jwt-secret.")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(32))
            with contextlib.suppress(FileExistsError):
                os.link(staging, self.secret_file)
        finally:
            os.unlink(staging)
        return self._read()

    def _read(self) -> str:
        secret = self.secret_file.read_text().strip()
        if len(secret) < 32:
            raise ValueError(f"{self.secret_file} holds no usable secret: delete it")
        return secret
