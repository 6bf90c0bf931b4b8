from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from mozilla_django_oidc.views import OIDCLogoutView

from console import audit_views, oidc, views
from console.api import api
from notifications.slack_views import slack_interactions
from runs import kinds
from runs.ag_ui_views import run_ag_ui

admin.site.site_header = "Loop Console"
admin.site.site_title = "Loop Console admin"
admin.site.index_title = "Administration"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("healthz", views.healthz, name="healthz"),
    # Pages link the SVG icon; a client that asks for the classic name gets it too.
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("favicon.svg"), permanent=True),
        name="favicon",
    ),
    path("metrics", views.metrics, name="metrics"),
    path("accounts/login/", oidc.login, name="login"),
    # A session the identity provider signed in ends at its end-session page too.
    path("accounts/logout/", OIDCLogoutView.as_view(), name="logout"),
    # Sign-in with the identity provider (console/oidc.py); 404 while it is off.
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("admin/", admin.site.urls),
    # The audit log, for administrators (console.audit).
    path("audit/", audit_views.audit_log, name="audit"),
    path("audit/export/", audit_views.audit_export, name="audit_export"),
    # A stream, outside the ninja API (whose schema it is not part of); same credentials.
    path("api/runs/<int:run_id>/ag-ui", run_ag_ui, name="run_ag_ui"),
    path("api/", api.urls),
    path("", include("runs.urls")),
    path("", include("recipes.urls")),
    path("", include("triggers.urls")),  # /hooks/<key>: inbound webhooks
    path("decide/", include("notifications.urls")),  # signed decision links from mails
    # Slack's interactivity request URL: signed by Slack, decided as the mapped person.
    path("slack/interactions/", slack_interactions, name="slack_interactions"),
    # Each loop kind's own pages (`LoopKind.urls`).
    *(path("", include(list(kind.urls))) for kind in kinds.all_kinds() if kind.urls),
]

handler403 = "console.views.forbidden"
handler404 = "console.views.not_found"
handler500 = "console.views.server_error"
