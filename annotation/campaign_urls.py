from django.urls import path

from . import campaign_views as views
from .study import manage_views as study

app_name = "campaigns"
urlpatterns = [
    path("", views.campaign_list, name="list"),
    path("new/", views.campaign_create, name="create"),
    path("<int:pk>/", views.campaign_detail, name="detail"),
    path("<int:pk>/edit/", views.campaign_edit, name="edit"),
    path("<int:pk>/state/", views.campaign_state, name="state"),
    path("<int:pk>/rebuild/", views.campaign_rebuild, name="rebuild"),
    path("<int:pk>/gold/", views.campaign_gold, name="gold"),
    path("<int:pk>/export/", views.campaign_export, name="export"),
    path("<int:pk>/study/", study.study_page, name="study"),
    path("<int:pk>/study/link/", study.study_action, name="study_action"),
    path("<int:pk>/study/participants.csv", study.study_export, name="study_export"),
]
