"""simdb.django.validators and simdb.drf: Django forms, models and DRF serializers refusing
near-duplicates, through Django's test client, on the example project's ``posts.Post``.

Django is configured once per session by tests/conftest.py (``django_site``); the views live in
this module and are reached by overriding ``ROOT_URLCONF``. DRF tests skip when
``djangorestframework`` is not installed (it is in the ``test`` extra).
"""

from __future__ import annotations

import json
import threading
import uuid

import pytest

pytestmark = pytest.mark.usefixtures("site")

BODY = (
    "The spring community meetup moves to the old library hall on Saturday afternoon; bring a friend, "
    "a snack to share and your questions about the new reading room and its opening hours this year."
)


@pytest.fixture(scope="module")
def site(django_site):
    return django_site


@pytest.fixture
def body():
    """A text of its own per test (the example's table is shared by the session), removed afterwards."""
    from posts.models import Post

    text = f"{BODY} Ref {uuid.uuid4().hex[:8]}."
    yield text
    Post.objects.filter(title__startswith="v-").delete()


def _views():
    from django import forms
    from django.http import JsonResponse
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt
    from posts.models import Post

    from simdb.django.validators import NotNearDuplicate, save_unless_near_duplicate

    class PostForm(forms.Form):
        title = forms.CharField()
        body = forms.CharField(validators=[NotNearDuplicate("posts.Post")])

    @csrf_exempt
    def create(request):
        form = PostForm(request.POST)
        if not form.is_valid():
            return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
        from django.core.exceptions import ValidationError

        try:
            post = save_unless_near_duplicate(Post(**form.cleaned_data))
        except ValidationError as exc:
            return JsonResponse({"errors": exc.message_dict}, status=409)
        return JsonResponse({"id": post.pk}, status=201)

    patterns = [path("form/", create)]
    try:
        from rest_framework import serializers
        from rest_framework.generics import CreateAPIView
    except ImportError:
        return patterns

    from simdb.drf import NearDuplicateRefusingMixin

    class PostSerializer(NearDuplicateRefusingMixin, serializers.ModelSerializer):
        body = serializers.CharField(validators=[NotNearDuplicate("posts.Post")])

        class Meta:
            model = Post
            fields = ["id", "title", "body"]

    class CreatePost(CreateAPIView):
        serializer_class = PostSerializer

    return [*patterns, path("api/", CreatePost.as_view())]


urlpatterns: list = []


@pytest.fixture
def client(settings_urls):
    from django.test import Client

    return Client()


@pytest.fixture
def settings_urls():
    from django.test.utils import override_settings

    urlpatterns[:] = _views()
    # the example project has no django.contrib.auth: DRF without users
    drf = {"UNAUTHENTICATED_USER": None, "DEFAULT_AUTHENTICATION_CLASSES": [], "DEFAULT_PERMISSION_CLASSES": []}
    with override_settings(ROOT_URLCONF=__name__, REST_FRAMEWORK=drf):
        yield


def test_form_validator_refuses_naming_the_match_and_its_similarity(client, body):
    first = client.post("/form/", {"title": "v-1", "body": body})
    assert first.status_code == 201
    dup = client.post("/form/", {"title": "v-2", "body": body.upper() + "!"})
    assert dup.status_code == 400
    (error,) = dup.json()["errors"]["body"]
    assert error["code"] == "near_duplicate"
    # the upper-cased text has the same features: 0 bits apart
    assert error["message"] == f"near-duplicate of '{first.json()['id']}' (fingerprint similarity 1.00, 0 of 64 bits differ)"


def test_save_refuses_what_arrived_after_the_form_check(body):
    """The form's check is not enough: a near-duplicate saved in between is refused at save, atomically."""
    from django.core.exceptions import ValidationError
    from posts.models import Post

    from simdb.django.validators import NotNearDuplicate, save_unless_near_duplicate

    NotNearDuplicate(Post)(body)  # the check passes: nothing stored yet
    first = save_unless_near_duplicate(Post(title="v-1", body=body))
    with pytest.raises(ValidationError) as caught:
        save_unless_near_duplicate(Post(title="v-2", body=body + "!"))
    assert caught.value.message_dict["body"][0].startswith(f"near-duplicate of '{first.pk}'")
    assert Post.objects.filter(title__startswith="v-").count() == 1
    with pytest.raises(ValidationError) as caught:  # the measures, for programs, under simdb's names
        NotNearDuplicate(Post)(body.upper())
    assert caught.value.code == "near_duplicate"
    assert caught.value.params == {"pk": first.pk, "jaccard": None, "distance": 0, "similarity": 1.0}
    first.title = "v-1 edited"  # an edit keeps its own text
    save_unless_near_duplicate(first)


def test_concurrent_saves_store_exactly_one(body):
    from django.core.exceptions import ValidationError
    from django.db import connection
    from posts.models import Post

    from simdb.django.validators import save_unless_near_duplicate

    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def worker(i):
        try:
            barrier.wait()
            save_unless_near_duplicate(Post(title=f"v-{i}", body=body))
            outcomes.append("saved")
        except ValidationError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused", "refused", "refused", "saved"]
    assert Post.objects.filter(title__startswith="v-").count() == 1


def test_drf_serializer_refuses_with_400(client, body):
    pytest.importorskip("rest_framework")
    first = client.post("/api/", json.dumps({"title": "v-1", "body": body}), content_type="application/json")
    assert first.status_code == 201
    dup = client.post("/api/", json.dumps({"title": "v-2", "body": body + "!"}), content_type="application/json")
    assert dup.status_code == 400
    (message,) = dup.json()["body"]
    assert message.startswith(f"near-duplicate of '{first.json()['id']}' (fingerprint similarity ")


def test_drf_save_is_atomic_after_validation(settings_urls, body):
    """Two serializers both valid (neither text stored yet): only the first save stores."""
    pytest.importorskip("rest_framework")
    from rest_framework.exceptions import ValidationError

    serializer_class = next(p for p in _views() if str(p.pattern) == "api/").callback.view_class.serializer_class
    a = serializer_class(data={"title": "v-a", "body": body})
    b = serializer_class(data={"title": "v-b", "body": body + "!"})
    assert a.is_valid() and b.is_valid()
    a.save()
    with pytest.raises(ValidationError) as caught:
        b.save()
    assert str(caught.value.detail["body"][0]).startswith(f"near-duplicate of '{a.instance.pk}'")


def test_a_model_form_edit_keeps_its_own_text(body):
    """Editing a stored row through a ModelForm: its own text (or a correction of it) is no near-duplicate
    of itself; another row's text still is."""
    from django import forms
    from posts.models import Post

    from simdb.django.validators import NearDuplicateFormMixin, NotNearDuplicate

    class PostForm(NearDuplicateFormMixin, forms.ModelForm):
        body = forms.CharField(validators=[NotNearDuplicate("posts.Post")])

        class Meta:
            model = Post
            fields = ["title", "body"]

    first = PostForm({"title": "v-1", "body": body})
    assert first.is_valid(), first.errors
    post = first.save()
    other = Post.objects.create(title="v-2", body="A different notice: the swimming pool closes for repairs in May.")
    edit = PostForm({"title": "v-1 edited", "body": body + " Edited."}, instance=post)
    assert edit.is_valid(), edit.errors
    assert edit.save().title == "v-1 edited"
    onto_other = PostForm({"title": "v-2 edited", "body": body + " Edited."}, instance=other)
    assert not onto_other.is_valid()
    assert onto_other.errors["body"] == [f"near-duplicate of '{post.pk}' (fingerprint similarity 1.00, 0 of 64 bits differ)"]
    assert PostForm({"title": "v-3", "body": body + " Edited."}).errors["body"][0].startswith(f"near-duplicate of '{post.pk}'")


def test_a_drf_update_keeps_its_own_text(settings_urls, body):
    """A serializer updating a stored row: NotNearDuplicate excludes the serializer's instance (DRF's
    requires_context), so the row's own text is valid; another row's text is not."""
    pytest.importorskip("rest_framework")
    from posts.models import Post

    serializer_class = next(p for p in _views() if str(p.pattern) == "api/").callback.view_class.serializer_class
    created = serializer_class(data={"title": "v-1", "body": body})
    assert created.is_valid(), created.errors
    post = created.save()
    update = serializer_class(post, data={"title": "v-1 edited", "body": body})
    assert update.is_valid(), update.errors
    assert update.save().title == "v-1 edited"
    other = Post.objects.create(title="v-2", body="A different notice: the swimming pool closes for repairs in May.")
    onto_other = serializer_class(other, data={"title": "v-2", "body": body + "!"})
    assert not onto_other.is_valid()
    assert str(onto_other.errors["body"][0]).startswith(f"near-duplicate of '{post.pk}'")


@pytest.mark.parametrize("k", [12, -1, "3"])
def test_a_bad_k_is_refused_when_the_validator_is_declared(k):
    """Not at every submission (a 500 each time): where the form field is declared."""
    from simdb.django.validators import NotNearDuplicate
    from simdb.errors import InputError, InvalidTypeError

    with pytest.raises((InputError, InvalidTypeError), match="^k[ =]"):
        NotNearDuplicate("posts.Post", k=k)


def test_drf_refusal_at_save_names_the_serializer_field(body):
    """A serializer field named otherwise than the model's text field (``text`` with ``source="body"``): the
    refusal of a near-duplicate that arrived after ``is_valid()`` names ``text``, as ``is_valid()`` would."""
    pytest.importorskip("rest_framework")
    from rest_framework import serializers
    from rest_framework.exceptions import ValidationError

    from simdb.django.validators import NotNearDuplicate
    from simdb.drf import NearDuplicateRefusingMixin

    class PostSerializer(NearDuplicateRefusingMixin, serializers.ModelSerializer):
        text = serializers.CharField(source="body", validators=[NotNearDuplicate("posts.Post")])

        class Meta:
            from posts.models import Post as model  # noqa: N813

            fields = ["id", "title", "text"]

    a = PostSerializer(data={"title": "v-a", "text": body})
    b = PostSerializer(data={"title": "v-b", "text": body + "!"})
    assert a.is_valid() and b.is_valid()
    a.save()
    with pytest.raises(ValidationError) as caught:
        b.save()
    assert list(caught.value.detail) == ["text"]
    assert str(caught.value.detail["text"][0]).startswith(f"near-duplicate of '{a.instance.pk}'")
    again = PostSerializer(data={"title": "v-c", "text": body})
    assert not again.is_valid() and list(again.errors) == ["text"]


def test_a_post_fingerprints_its_text_once(client, body, monkeypatch):
    """The form's check, save_unless_near_duplicate's check under its lock and save() all need the text's
    fingerprint: computed once (three tokenizations of a 5 MB post took seconds each)."""
    from simdb.core.fingerprint import Fingerprinter

    calls: list[str] = []
    real = Fingerprinter.fingerprint

    def counted(self, text, *args, **kwargs):
        calls.append(text)
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Fingerprinter, "fingerprint", counted)
    assert client.post("/form/", {"title": "v-1", "body": body}).status_code == 201
    assert calls.count(body) == 1
