#!/bin/sh
# The respond Lambda's handler. AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap (the Lambda Web Adapter
# layer) runs this script instead of the Python runtime; the adapter waits for /healthz, then
# forwards each invocation to uvicorn over HTTP and streams the response back.
set -eu
# The zip holds the dependencies beside the project's packages, at the task root.
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# On SIGTERM, requests get 2 s to finish; those still running are then answered 503
# `server_stopping` (handlers/shutdown.py), rather than held until the pool's timeout when the
# database is down. No WebSocket protocol: the adapter forwards HTTP only, and uvicorn would
# otherwise import one at every cold start.
exec python -m uvicorn handlers.lambda_respond:app \
    --host 127.0.0.1 --port "${AWS_LWA_PORT:-8080}" --no-server-header \
    --timeout-graceful-shutdown 2 --ws none
