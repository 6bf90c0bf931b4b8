import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# A web server process: the settings give it a bounded connection pool (see docs/security.md).
os.environ.setdefault("LOOP_WEB_PROCESS", "1")
application = get_wsgi_application()
