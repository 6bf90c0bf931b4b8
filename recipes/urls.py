from django.urls import path

from recipes import views

urlpatterns = [
    path("recipes/", views.recipe_list, name="recipe_list"),
    path("recipes/<slug:slug>/", views.recipe_detail, name="recipe_detail"),
    path("recipes/<slug:slug>/diff/", views.recipe_diff, name="recipe_diff"),
]
