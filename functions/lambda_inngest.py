"""Lambda entry for `inngest`: the Inngest serve endpoint through Mangum behind a Function URL.

Inngest calls the endpoint once per step and reads one JSON reply, which suits Mangum's
buffered request/response. Lifespan is off: Mangum would run startup and shutdown around every
invocation and close the database pool each time; the pool lives as long as the container.
With SnapStart (serverless.yml), Lambda's Python runtime runs the hooks registered below.
"""

from infra.entry_import import after_build, before_import

# Before anything imports LangGraph or LangChain: their dependencies' heavy package bodies wait
# until used, which the background job never does, and the garbage collector until the app is
# built.
before_import()

import asyncio  # noqa: E402

from mangum import Mangum  # noqa: E402

from functions.app import create_inngest_app  # noqa: E402
from infra import snapstart  # noqa: E402
from infra.logs import configure_logging  # noqa: E402
from infra.runtime import Services  # noqa: E402
from infra.secrets import load_settings  # noqa: E402
from infra.telemetry import setup_telemetry  # noqa: E402

configure_logging()
setup_telemetry()  # OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT is set; else nothing
_app = create_inngest_app(load_settings())
handler = Mangum(_app, lifespan="off")


def before_snapshot() -> None:
    """No connection in the snapshot; the database's code path warmed first (infra/snapstart.py).
    On the event loop Mangum runs every call on."""
    services: Services = _app.state.services
    asyncio.get_event_loop().run_until_complete(snapstart.before_snapshot(services))


def after_restore() -> None:
    """`random` reseeded and the settings read again; the app made anew from them if they
    changed (its pool, the Inngest client's keys, the assistants' model options)."""
    global _app
    services: Services = _app.state.services
    settings = snapstart.after_restore(services.settings)
    if settings is not None:
        _app = handler.app = create_inngest_app(settings)


try:
    # Lambda's Python runtime (3.12 and later) provides it, and runs the hooks under SnapStart.
    from snapshot_restore_py import register_after_restore, register_before_snapshot
except ImportError:  # elsewhere: no snapshots, nothing to register with
    pass
else:
    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore)

# What the import made is frozen, and collecting resumes (infra/entry_import.py).
after_build()
