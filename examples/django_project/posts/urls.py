from django.urls import path

from . import views

urlpatterns = [
    path("posts/", views.create_post, name="create_post"),
    path("posts/<int:post_id>/", views.get_post, name="get_post"),
    path("posts/<int:post_id>/similar/", views.similar_posts, name="similar_posts"),
]
