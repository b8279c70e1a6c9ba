"""Lambda entry for `respond`: uvicorn serves this app behind the Lambda Web Adapter (run.sh).

Mangum would buffer the whole SSE body; the adapter streams it to a Function URL in
RESPONSE_STREAM mode. Only the quick path is imported: a cold start pays for every module.
"""

from handlers.app import create_app
from infra.logs import configure_logging
from infra.secrets import load_settings
from infra.telemetry import setup_telemetry

configure_logging()
setup_telemetry()  # OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT is set; else nothing
app = create_app(load_settings(), docs=False)
