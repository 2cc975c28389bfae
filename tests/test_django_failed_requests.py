"""Django and DRF requests that fail store nothing, and the retry is accepted (what tests/test_validators.py
checks for Flask and FastAPI): a CSRF failure, a later field's validator, the view's own refusal (401/403),
a view that raises after saving (rolled back under ``ATOMIC_REQUESTS``, as docs/django.md says; kept
without it, as any Django save), and 8 identical concurrent posts storing one.

Guards: Django's validator stores nothing (only ``save_unless_near_duplicate`` does), so these passed
when written. Django is configured once per session by tests/conftest.py (``django_site``); the views
live in this module, reached by overriding ``ROOT_URLCONF`` (with Django's CSRF middleware added).
"""

from __future__ import annotations

import json
import threading
import uuid

import pytest

pytestmark = pytest.mark.usefixtures("django_site")

TEXT = (
    "Volunteers are needed for the river clean-up on Sunday morning; gloves, bags and hot tea are provided "
    "at the boathouse, and the route follows the towpath from the mill to the footbridge."
)


@pytest.fixture
def body():
    """A text of its own per test; the test's rows (titles ``f-...``) removed afterwards."""
    from posts.models import Post

    yield f"{TEXT} Ref {uuid.uuid4().hex[:8]}."
    Post.objects.filter(title__startswith="f-").delete()


def _stored(body: str) -> int:
    from posts.models import Post

    return Post.objects.filter(body=body).count()


def _title_is_ours(value: str) -> None:
    from django.core.exceptions import ValidationError

    if not value.startswith("f-"):
        raise ValidationError("titles start with f-", code="title")


def _form_views() -> list:
    """A CSRF-protected form view: ``body`` checked by ``NotNearDuplicate``, then ``title`` (a later field with
    a validator of its own); ``?fail=401`` refuses after the form is valid, ``?fail=raise`` raises after saving."""
    from django import forms
    from django.core.exceptions import ValidationError
    from django.http import JsonResponse
    from django.middleware.csrf import get_token
    from django.urls import path
    from posts.models import Post

    from simdb.django.validators import NotNearDuplicate, save_unless_near_duplicate

    class PostForm(forms.Form):
        body = forms.CharField(validators=[NotNearDuplicate("posts.Post")])
        title = forms.CharField(validators=[_title_is_ours])

    def create(request):
        form = PostForm(request.POST)
        if not form.is_valid():
            return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
        if request.GET.get("fail") == "401":
            return JsonResponse({"error": "log in first"}, status=401)
        try:
            post = save_unless_near_duplicate(Post(**form.cleaned_data))
        except ValidationError as exc:
            return JsonResponse({"errors": exc.message_dict}, status=409)
        if request.GET.get("fail") == "raise":
            raise RuntimeError("the view failed after saving")
        return JsonResponse({"id": post.pk}, status=201)

    def token(request):
        return JsonResponse({"csrf_token": get_token(request)})

    return [path("form/", create), path("token/", token)]


def _drf_views() -> list:
    """A DRF create view: ``body`` checked by ``NotNearDuplicate``, then ``title`` (a later field) and the
    serializer's ``validate()``; a permission class that answers 401 without ``X-Allow: yes``;
    ``?fail=403`` refuses after validation, ``?fail=raise`` / ``?fail=503`` fail after saving."""
    from django.urls import path
    from posts.models import Post
    from rest_framework import serializers
    from rest_framework.authentication import BaseAuthentication
    from rest_framework.exceptions import APIException, PermissionDenied
    from rest_framework.generics import CreateAPIView
    from rest_framework.permissions import BasePermission

    from simdb.django.validators import NotNearDuplicate
    from simdb.drf import NearDuplicateRefusingMixin

    class PostSerializer(NearDuplicateRefusingMixin, serializers.ModelSerializer):
        body = serializers.CharField(validators=[NotNearDuplicate("posts.Post")])
        title = serializers.CharField(validators=[_title_is_ours])

        class Meta:
            model = Post
            fields = ["id", "body", "title"]

        def validate(self, attrs):
            if attrs["title"] == "f-refused":
                raise serializers.ValidationError("this title is refused as a whole")
            return attrs

    class ServiceUnavailable(APIException):
        status_code = 503
        default_detail = "try again later"

    class NoUsers(BaseAuthentication):
        """Authenticates nobody, but names a scheme: a denied permission is a 401, not a 403."""

        def authenticate(self, request):
            return None

        def authenticate_header(self, request):
            return "Token"

    class HeaderAllows(BasePermission):
        def has_permission(self, request, view):
            return request.headers.get("X-Allow") == "yes"

    class CreatePost(CreateAPIView):
        serializer_class = PostSerializer
        authentication_classes = [NoUsers]
        permission_classes = [HeaderAllows]

        def perform_create(self, serializer):
            fail = self.request.query_params.get("fail")
            if fail == "403":
                raise PermissionDenied("not yours to post")
            serializer.save()
            if fail == "raise":
                raise RuntimeError("the view failed after saving")
            if fail == "503":
                raise ServiceUnavailable()

    return [path("api/", CreatePost.as_view())]


urlpatterns: list = []


@pytest.fixture
def site():
    from django.test.utils import override_settings

    patterns = _form_views()
    try:
        import rest_framework  # noqa: F401
    except ImportError:
        pass
    else:
        patterns += _drf_views()
    urlpatterns[:] = patterns
    drf = {"UNAUTHENTICATED_USER": None, "DEFAULT_AUTHENTICATION_CLASSES": [], "DEFAULT_PERMISSION_CLASSES": []}
    middleware = ["django.middleware.common.CommonMiddleware", "django.middleware.csrf.CsrfViewMiddleware"]
    with override_settings(ROOT_URLCONF=__name__, REST_FRAMEWORK=drf, MIDDLEWARE=middleware):
        yield


@pytest.fixture(params=[True, False], ids=["atomic-requests", "no-atomic-requests"])
def atomic_requests(request, monkeypatch):
    """``ATOMIC_REQUESTS`` of the default database, as docs/django.md recommends (read per request)."""
    from django.db import connections

    monkeypatch.setitem(connections.settings["default"], "ATOMIC_REQUESTS", request.param)
    return request.param


def _client(**kwargs):
    from django.test import Client

    return Client(enforce_csrf_checks=True, raise_request_exception=False, **kwargs)


def _form_post(client, data: dict, query: str = ""):
    token = client.get("/token/").json()["csrf_token"]
    return client.post(f"/form/{query}", {**data, "csrfmiddlewaretoken": token})


def _api_post(client, data: dict, query: str = "", allow: bool = True):
    headers = {"X-Allow": "yes"} if allow else {}
    return client.post(f"/api/{query}", json.dumps(data), content_type="application/json", headers=headers)


def test_form_csrf_failure_stores_nothing_and_the_retry_is_accepted(site, body):
    client = _client()
    refused = client.post("/form/", {"title": "f-1", "body": body})  # no token
    assert refused.status_code == 403 and b"CSRF" in refused.content
    assert _stored(body) == 0
    retry = _form_post(client, {"title": "f-1", "body": body})
    assert retry.status_code == 201, retry.content
    assert _stored(body) == 1


def test_form_later_field_failure_stores_nothing_and_the_retry_is_accepted(site, body):
    client = _client()
    refused = _form_post(client, {"title": "no prefix", "body": body})
    assert refused.status_code == 400
    assert list(refused.json()["errors"]) == ["title"]  # the body was fine: its check stored nothing
    assert _stored(body) == 0
    assert _form_post(client, {"title": "f-1", "body": body}).status_code == 201
    assert _stored(body) == 1


def test_form_view_refusing_after_validation_stores_nothing(site, body):
    client = _client()
    assert _form_post(client, {"title": "f-1", "body": body}, "?fail=401").status_code == 401
    assert _stored(body) == 0
    assert _form_post(client, {"title": "f-1", "body": body}).status_code == 201
    assert _stored(body) == 1


def test_form_view_raising_after_saving(site, body, atomic_requests):
    """docs/django.md: a request that fails after saving keeps the row, as any Django save, unless the request
    is one transaction (``ATOMIC_REQUESTS``): then the row goes with it and the retry is accepted."""
    client = _client()
    assert _form_post(client, {"title": "f-1", "body": body}, "?fail=raise").status_code == 500
    if atomic_requests:
        assert _stored(body) == 0
        assert _form_post(client, {"title": "f-1", "body": body}).status_code == 201
    else:
        assert _stored(body) == 1
        again = _form_post(client, {"title": "f-1", "body": body})
        assert again.status_code == 400 and again.json()["errors"]["body"][0]["code"] == "near_duplicate"
    assert _stored(body) == 1


def _concurrently(post, n: int = 8) -> list[int]:
    """``post()`` from ``n`` threads released together; their status codes."""
    from django.db import connection

    codes: list[int] = []
    barrier = threading.Barrier(n)

    def worker():
        try:
            barrier.wait()
            codes.append(post())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def test_form_eight_identical_concurrent_posts_store_one(site, body, atomic_requests):
    """Each client fetches its CSRF token first; then the 8 posts go together: one is stored, the others are
    refused by the form's check (400) or, having passed it together, by ``save_unless_near_duplicate`` (409)."""
    prepared = [(c, c.get("/token/").json()["csrf_token"]) for c in (_client() for _ in range(8))]
    lock = threading.Lock()

    def post():
        with lock:
            client, token = prepared.pop()
        return client.post("/form/", {"title": "f-1", "body": body, "csrfmiddlewaretoken": token}).status_code

    codes = _concurrently(post)
    assert len(codes) == 8 and codes.count(201) == 1
    assert codes.count(400) + codes.count(409) == 7
    assert _stored(body) == 1


def test_drf_permission_denied_401_stores_nothing_and_the_retry_is_accepted(site, body):
    pytest.importorskip("rest_framework")
    client = _client()
    refused = _api_post(client, {"title": "f-1", "body": body}, allow=False)
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Token"
    assert _stored(body) == 0
    assert _api_post(client, {"title": "f-1", "body": body}).status_code == 201
    assert _stored(body) == 1


def test_drf_403_after_validation_stores_nothing_and_the_retry_is_accepted(site, body):
    pytest.importorskip("rest_framework")
    client = _client()
    assert _api_post(client, {"title": "f-1", "body": body}, "?fail=403").status_code == 403
    assert _stored(body) == 0
    assert _api_post(client, {"title": "f-1", "body": body}).status_code == 201
    assert _stored(body) == 1


@pytest.mark.parametrize("title", ["no prefix", "f-refused"], ids=["later-field", "validate"])
def test_drf_later_validation_failure_stores_nothing_and_the_retry_is_accepted(site, body, title):
    pytest.importorskip("rest_framework")
    client = _client()
    refused = _api_post(client, {"title": title, "body": body})
    assert refused.status_code == 400
    assert list(refused.json()) == (["title"] if title == "no prefix" else ["non_field_errors"])
    assert _stored(body) == 0
    assert _api_post(client, {"title": "f-1", "body": body}).status_code == 201
    assert _stored(body) == 1


@pytest.mark.parametrize("fail", ["raise", "503"])
def test_drf_view_failing_after_saving(site, body, atomic_requests, fail):
    """An exception out of the view (500) or one DRF answers itself (503, its handler marks the request's
    transaction for rollback): under ``ATOMIC_REQUESTS`` the row goes with the request; without, it stays."""
    pytest.importorskip("rest_framework")
    client = _client()
    assert _api_post(client, {"title": "f-1", "body": body}, f"?fail={fail}").status_code == (500 if fail == "raise" else 503)
    if atomic_requests:
        assert _stored(body) == 0
        assert _api_post(client, {"title": "f-1", "body": body}).status_code == 201
    else:
        assert _stored(body) == 1
        again = _api_post(client, {"title": "f-1", "body": body})
        assert again.status_code == 400 and list(again.json()) == ["body"]
    assert _stored(body) == 1


def test_drf_eight_identical_concurrent_posts_store_one(site, body, atomic_requests):
    pytest.importorskip("rest_framework")
    codes = _concurrently(lambda: _api_post(_client(), {"title": "f-1", "body": body}).status_code)
    assert codes.count(201) == 1 and codes.count(400) == 7
    assert _stored(body) == 1
