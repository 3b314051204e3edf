from django.urls import path

from scenarios import views

app_name = "scenarios"
urlpatterns = [
    path("", views.scenario_list, name="list"),
    path("new/", views.scenario_create, name="create"),
    path("bulk/", views.scenario_bulk, name="bulk"),
    path("export/", views.scenario_export, name="export"),
    path("import/", views.scenario_import, name="import"),
    path("import/<int:job_id>/confirm/", views.scenario_import_confirm, name="import_confirm"),
    path("personas/", views.persona_list, name="personas"),
    path("personas/new/", views.persona_edit, name="persona_create"),
    path("personas/<int:pk>/", views.persona_edit, name="persona_edit"),
    path("<int:pk>/", views.scenario_detail, name="detail"),
    path("<int:pk>/edit/", views.scenario_edit, name="edit"),
    path("<int:pk>/review/", views.scenario_review, name="review"),
    path("<int:pk>/history/", views.scenario_history, name="history"),
    path("<int:pk>/history/<int:number>/", views.revision_diff, name="revision"),
]
