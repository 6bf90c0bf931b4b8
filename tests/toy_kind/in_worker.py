"""Imported by the toy's own worker as it starts (`celery worker --include`, before its
pool forks): that process knows the toy kind as the test process does once the `toy_kind`
fixture registered it. A kind that is an app registers from its AppConfig.ready()."""

from runs import kinds

from .kind import TOY

kinds.register(TOY)
