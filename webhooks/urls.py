from django.urls import path

from . import views

app_name = "webhooks"

urlpatterns = [
    path("", views.endpoint_list, name="list"),
    path("new/", views.endpoint_create, name="create"),
    path("<int:pk>/", views.endpoint_detail, name="detail"),
    path("<int:pk>/edit/", views.endpoint_edit, name="edit"),
    path("<int:pk>/delete/", views.endpoint_delete, name="delete"),
    path("deliveries/<int:pk>/", views.delivery_detail, name="delivery"),
    path("deliveries/<int:pk>/resend/", views.delivery_resend, name="resend"),
]
