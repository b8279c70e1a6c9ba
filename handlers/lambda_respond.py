"""Lambda entry for `respond`: uvicorn serves this app behind the Lambda Web Adapter (run.sh).

Mangum would buffer the whole SSE body; the adapter streams it to a Function URL in
RESPONSE_STREAM mode. Only the quick path is imported: a cold start pays for every module. With
SnapStart (serverless.yml) the adapter calls the hooks handlers/snapstart.py serves.
"""

from infra.entry_import import after_build, before_import

# Before anything imports LangGraph or LangChain: their dependencies' heavy package bodies wait
# until used, which the quick path never does, and the garbage collector until the app is built.
before_import()

import os  # noqa: E402

from handlers.app import create_app  # noqa: E402
from handlers.snapstart import install_snapstart_hooks  # noqa: E402
from infra.logs import configure_logging  # noqa: E402
from infra.secrets import load_settings  # noqa: E402
from infra.telemetry import setup_telemetry  # noqa: E402

configure_logging()
setup_telemetry()  # OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT is set; else nothing
app = create_app(load_settings(), docs=False)
install_snapstart_hooks(app, os.environ)
after_build()
