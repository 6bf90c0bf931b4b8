from django.urls import path

from loops.driven import views

urlpatterns = [
    path("loops/", views.loop_list, name="loop_list"),
    path("loops/<int:loop_id>/", views.loop_detail, name="loop_detail"),
    path("runs/<int:run_id>/loops/", views.run_loops_part, name="run_loops_part"),
]
