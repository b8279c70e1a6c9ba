"""Lambda entry for `inngest`: the Inngest serve endpoint through Mangum behind a Function URL.

Inngest calls the endpoint once per step and reads one JSON reply, which suits Mangum's
buffered request/response. Lifespan is off: Mangum would run startup and shutdown around every
invocation and close the database pool each time; the pool lives as long as the container.
"""

from infra.deferred_imports import defer_package_bodies

# Before anything imports LangGraph or LangChain: their dependencies' heavy package bodies wait
# until used, which the background job never does.
defer_package_bodies()

from mangum import Mangum  # noqa: E402

from functions.app import create_inngest_app  # noqa: E402
from infra.logs import configure_logging  # noqa: E402
from infra.secrets import load_settings  # noqa: E402
from infra.telemetry import setup_telemetry  # noqa: E402

configure_logging()
setup_telemetry()  # OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT is set; else nothing
handler = Mangum(create_inngest_app(load_settings()), lifespan="off")
