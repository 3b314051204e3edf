from django.urls import path

from scoring.judges import views

app_name = "judges"
urlpatterns = [
    path("", views.config_list, name="list"),
    path("new/", views.config_edit, name="create"),
    path("<int:pk>/", views.config_edit, name="edit"),
    path("<int:pk>/bias/", views.bias, name="bias"),
    path("runs/", views.run_list, name="runs"),
    path("runs/new/", views.run_create, name="run_create"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/progress/", views.run_progress, name="run_progress"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:pk>/resume/", views.run_resume, name="run_resume"),
    path("runs/<int:pk>/export/", views.run_export, name="run_export"),
    path("import/", views.verdict_import, name="import"),
    path("import/<int:job_id>/", views.import_job, name="import_job"),
    path("import/<int:job_id>/confirm/", views.import_confirm, name="import_confirm"),
]
