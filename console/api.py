"""The one NinjaAPI of the project; each app contributes a Router."""

from ninja import NinjaAPI

api = NinjaAPI(title="Loop Console API", version="1", urls_namespace="api")
