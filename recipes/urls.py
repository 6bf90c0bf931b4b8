from django.urls import path

from recipes import views
from recipes.planeai import views as step_machine_views

urlpatterns = [
    path("recipes/", views.recipe_list, name="recipe_list"),
    path("recipes/<slug:slug>/", views.recipe_detail, name="recipe_detail"),
    path("recipes/<slug:slug>/diff/", views.recipe_diff, name="recipe_diff"),
    path("recipes/<slug:slug>/start/", views.recipe_start, name="recipe_start"),
    path(
        "recipes/<slug:slug>/demo-repository/",
        step_machine_views.demo_repository,
        name="recipe_demo_repository",
    ),
]
