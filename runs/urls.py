from django.urls import path

from runs import views

urlpatterns = [
    path("runs/", views.run_list, name="run_list"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
]
