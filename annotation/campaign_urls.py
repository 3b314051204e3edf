from django.urls import path

from . import campaign_views as views

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
]
