"""The respond app behind Mangum, as it would be without the Lambda Web Adapter: the tests show
why it is not deployed this way (Mangum buffers the whole stream)."""

from mangum import Mangum

from handlers.app import create_app
from infra.secrets import load_settings

handler = Mangum(create_app(load_settings()), lifespan="off")
