from django.urls import path

from . import campaign_views as views
from .qualification import research_views as qualification
from .study import manage_views as study

app_name = "campaigns"
urlpatterns = [
    path("", views.campaign_list, name="list"),
    path("new/", views.campaign_create, name="create"),
    path("new/count/", views.campaign_set_count, name="set_count"),
    path("<int:pk>/build/", views.campaign_build_status, name="build_status"),
    path("<int:pk>/", views.campaign_detail, name="detail"),
    path("<int:pk>/live/", views.campaign_live, name="live"),
    path("<int:pk>/edit/", views.campaign_edit, name="edit"),
    path("<int:pk>/state/", views.campaign_state, name="state"),
    path("<int:pk>/rebuild/", views.campaign_rebuild, name="rebuild"),
    path("<int:pk>/gold/", views.campaign_gold, name="gold"),
    path("<int:pk>/export/", views.campaign_export, name="export"),
    path("<int:pk>/study/", study.study_page, name="study"),
    path("<int:pk>/study/link/", study.study_action, name="study_action"),
    path("<int:pk>/study/participants.csv", study.study_export, name="study_export"),
    path("<int:pk>/qualification/", qualification.qualification, name="qualification"),
    path("<int:pk>/qualification/items/", qualification.add_item, name="practice_add"),
    path("<int:pk>/qualification/import/", qualification.import_items, name="practice_import"),
    path(
        "<int:pk>/qualification/items/<int:item>/delete/",
        qualification.delete_item,
        name="practice_delete",
    ),
]
