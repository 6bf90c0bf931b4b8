import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# A web server process: the settings give it a bounded connection pool (see docs/security.md).
os.environ.setdefault("LOOP_WEB_PROCESS", "1")
application = get_asgi_application()

from console.secrets import protect_process  # noqa: E402 - after the settings are known

protect_process()
