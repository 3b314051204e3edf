from django.urls import path

from scenarios.companions import views

app_name = "companions"
urlpatterns = [
    path("", views.companion_list, name="list"),
    path("new/", views.companion_edit, name="create"),
    path("<int:pk>/", views.companion_edit, name="edit"),
    path("runs/", views.run_list, name="runs"),
    path("runs/new/", views.run_create, name="run_create"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/progress/", views.run_progress, name="run_progress"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:pk>/resume/", views.run_resume, name="run_resume"),
    path("responses/", views.response_browser, name="responses"),
    path("responses/export/", views.response_export, name="response_export"),
    path("responses/import/", views.response_import, name="response_import"),
    path(
        "responses/import/<int:job_id>/confirm/",
        views.response_import_confirm,
        name="response_import_confirm",
    ),
]
