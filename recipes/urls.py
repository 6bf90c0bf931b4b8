from django.urls import path

from recipes import views

urlpatterns = [
    path("recipes/", views.recipe_list, name="recipe_list"),
]
