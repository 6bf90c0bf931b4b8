"""The step machine's own pages, included at the site's root from its `LoopKind.urls`."""

from django.urls import path

from . import views

urlpatterns = [
    path("runs/<int:run_id>/tick/", views.run_tick, name="run_tick"),
    path("runs/<int:run_id>/review/", views.run_review, name="run_review"),
    path("runs/<int:run_id>/review/merge/", views.review_merge, name="review_merge"),
    path(
        "recipes/<slug:slug>/demo-repository/",
        views.demo_repository,
        name="recipe_demo_repository",
    ),
]
