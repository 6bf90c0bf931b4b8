from django.urls import path

from . import views

urlpatterns = [
    path("hooks/<str:key>", views.receive_webhook, name="receive_webhook"),
]
