"""POST /posts/ refuses near-duplicates with 409 and the matching post."""

import json

from django.conf import settings
from django.db import connection, transaction
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from .models import Post


@csrf_exempt
@require_POST
def create_post(request):
    try:
        data = json.loads(request.body or b"{}")
    except ValueError:
        data = {}
    title, body = data.get("title"), data.get("body")
    if not isinstance(title, str) or not isinstance(body, str):
        return JsonResponse({"error": "title and body (strings) are required"}, status=400)
    with transaction.atomic():
        # serialise concurrent submissions so two near-identical posts cannot both get in
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext('posts-near-duplicate-check'))")
        match = Post.objects.near_duplicates(body, k=settings.SIMDB_K).first()
        if match is not None:
            return JsonResponse(
                {"error": "near-duplicate", "distance": match.distance, "match": match.to_dict()}, status=409
            )
        post = Post.objects.create(title=title, body=body)
    return JsonResponse(post.to_dict(), status=201)


@require_GET
def get_post(request, post_id):
    try:
        return JsonResponse(Post.objects.get(pk=post_id).to_dict())
    except Post.DoesNotExist:
        raise Http404 from None


@require_GET
def similar_posts(request, post_id):
    """Posts within k bits of this one (k from ?k=, default SIMDB_K), nearest first."""
    try:
        post = Post.objects.get(pk=post_id)
    except Post.DoesNotExist:
        raise Http404 from None
    k = int(request.GET.get("k", settings.SIMDB_K))
    if post.fp is None:
        return JsonResponse({"results": []})
    qs = Post.objects.near_duplicates(post.fp, k=k).exclude(pk=post.pk)[:20]
    return JsonResponse({"results": [dict(p.to_dict(), distance=p.distance) for p in qs]})
