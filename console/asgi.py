import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# A web server process: the settings give it a bounded connection pool (see docs/security.md).
os.environ.setdefault("LOOP_WEB_PROCESS", "1")
django_application = get_asgi_application()

# /mcp is the orchestration MCP server (the MCP SDK's streamable HTTP transport); the rest
# is Django.
from console.secrets import protect_process  # noqa: E402 - after the settings are known
from runs.orchestration.http import mount  # noqa: E402 - needs the apps loaded above

application = mount(django_application)
protect_process()
