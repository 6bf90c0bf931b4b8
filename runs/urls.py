from django.urls import path

from runs import live_views, views, views_history, views_output, views_start

urlpatterns = [
    path("runs/", views.run_list, name="run_list"),
    path("recipes/<slug:slug>/start/", views_start.recipe_start, name="recipe_start"),
    path("runs/live/", live_views.inbox_stream, name="inbox_live"),
    path("runs/compare/", views_history.iteration_compare, name="iteration_compare"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/part/<slug:part>/", views.run_part, name="run_part"),
    path("runs/<int:run_id>/iterations/", views.run_iterations, name="run_iterations"),
    path("runs/<int:run_id>/events/", views.run_events, name="run_events"),
    path(
        "runs/<int:run_id>/iterations/<int:iteration_id>/output/",
        views_output.iteration_output,
        name="iteration_output",
    ),
    path(
        "runs/<int:run_id>/nodes/<int:node_id>/output/",
        views_output.node_output,
        name="node_output",
    ),
    path("runs/<int:run_id>/live/", live_views.run_stream, name="run_live"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/resume/", views.run_resume, name="run_resume"),
    path("runs/<int:run_id>/rerun/", views.run_rerun, name="run_rerun"),
    path("runs/<int:run_id>/gates/<int:gate_id>/", views.gate_detail, name="gate_detail"),
    path("runs/<int:run_id>/fork/", views_history.run_fork, name="run_fork"),
    path("runs/<int:run_id>/budget/", views_history.run_budget_change, name="run_budget"),
    path("runs/<int:run_id>/gates/<int:gate_id>/approve/", views.gate_approve, name="gate_approve"),
    path("runs/<int:run_id>/gates/<int:gate_id>/reject/", views.gate_reject, name="gate_reject"),
    path("runs/<int:run_id>/gates/<int:gate_id>/respond/", views.gate_respond, name="gate_respond"),
]
