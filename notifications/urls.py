from django.urls import path

from . import views

urlpatterns = [
    # Signed decision links from mails: no login, the token is the credential.
    path("<str:token>/", views.decision_link, name="decision_link"),
]
