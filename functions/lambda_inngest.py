"""Lambda entry for `inngest`: the Inngest serve endpoint through Mangum behind a Function URL.

Inngest calls the endpoint once per step and reads one JSON reply, which suits Mangum's
buffered request/response. Lifespan is off: Mangum would run startup and shutdown around every
invocation and close the database pool each time; the pool lives as long as the container.
"""

from mangum import Mangum

from functions.app import create_inngest_app
from infra.logs import configure_logging
from infra.secrets import load_settings
from infra.telemetry import setup_telemetry

configure_logging()
setup_telemetry()  # OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT is set; else nothing
handler = Mangum(create_inngest_app(load_settings()), lifespan="off")
