"""simdb.validators (the shared refusal) and its FastAPI and WTForms (Flask-WTF) adapters, against PostgreSQL.

The Django and Django REST framework adapters: tests/test_django_validators.py.
"""

# no "from __future__ import annotations": FastAPI reads the local endpoint's annotations as objects
import asyncio
import importlib.util
import threading
import uuid
from typing import Annotated

import pytest

from simdb import SimhashIndex
from simdb.validators import NearDuplicateError, admit, measures, refusal_message, release, reserve

LONG = (
    "PostgreSQL is a powerful open source object relational database system with over thirty years of active "
    "development that has earned it a strong reputation for reliability, feature robustness and performance."
)
REWORDED = LONG.replace("a strong", "a solid")  # Jaccard 0.81 of token 3-grams: a near-duplicate
OTHER = "Cats sleep most of the day in sunny spots, and hunt at dusk when the garden is quiet."


@pytest.fixture
def index(database_url, collection_name):
    with SimhashIndex(database_url, collection_name) as idx:
        yield idx


def test_admit_stores_then_refuses_naming_the_match_and_its_similarity(index):
    assert admit(index, "post-1", LONG).inserted
    with pytest.raises(NearDuplicateError) as caught:
        admit(index, "post-2", REWORDED)
    err = caught.value
    assert isinstance(err, ValueError) and err.key == "post-2" and err.match.key == "post-1"
    assert str(err).startswith("near-duplicate of 'post-1' (Jaccard similarity 0.")
    assert f"{err.match.jaccard:.2f}" in str(err)
    # for programs: the measures under simdb's names, never the Jaccard called "similarity"
    assert measures(err.match) == {"jaccard": round(err.match.jaccard, 4), "distance": err.match.distance}
    assert "post-2" not in index and admit(index, "post-3", OTHER).inserted


def test_release_gives_the_text_back(index):
    admit(index, "post-1", LONG)
    assert release(index, "post-1")
    assert admit(index, "post-2", REWORDED).inserted


def test_hamming_collection_message_names_the_distance(database_url, collection_name):
    with SimhashIndex(database_url, collection_name, verify=False) as idx:
        admit(idx, "a", LONG)
        with pytest.raises(NearDuplicateError) as caught:
            admit(idx, "b", LONG + "!")
    m = caught.value.match
    assert str(caught.value) == refusal_message(m) == (
        f"near-duplicate of 'a' (fingerprint similarity {1 - m.distance / 64:.2f}, {m.distance} of 64 bits differ)"
    )
    assert measures(m) == {"jaccard": None, "distance": m.distance, "similarity": round(1 - m.distance / 64, 4)}


def test_concurrent_admissions_admit_exactly_one(index):
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def submit(i):
        barrier.wait()
        try:
            admit(index, f"k{i}", LONG if i % 2 else REWORDED)
            outcomes.append("admitted")
        except NearDuplicateError:
            outcomes.append("refused")

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["admitted"] + ["refused"] * 5


# ------------------------------------------------------------------------------------------------ FastAPI
def _fastapi_app(database, collection):
    from contextlib import asynccontextmanager

    from fastapi import Depends, FastAPI
    from pydantic import BaseModel

    from simdb.aio import AsyncSimhashIndex
    from simdb.fastapi import Admitted, NotNearDuplicate

    class NewPost(BaseModel):
        title: str
        body: str

    @asynccontextmanager
    async def lifespan(app):
        async with AsyncSimhashIndex(database, collection) as index:
            app.state.simdb_index = index
            yield

    app = FastAPI(lifespan=lifespan)
    refuse = NotNearDuplicate(NewPost, text="body")

    @app.post("/posts", status_code=201)
    async def create_post(admitted: Annotated[Admitted, Depends(refuse)]):
        return {"id": admitted.key, "title": admitted.item.title}

    return app


def _fastapi_scenario(app, requests):
    httpx = pytest.importorskip("httpx")

    async def run():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return [await client.post("/posts", json=body) for body in requests]

    return asyncio.run(run())


def test_fastapi_dependency_admits_then_answers_409(database_url, collection_name):
    pytest.importorskip("fastapi")
    first, dup, other, bad = _fastapi_scenario(
        _fastapi_app(database_url, collection_name),
        [{"title": "a", "body": LONG}, {"title": "b", "body": REWORDED}, {"title": "c", "body": OTHER}, {"title": "d"}],
    )
    assert first.status_code == 201 and other.status_code == 201 and bad.status_code == 422
    assert dup.status_code == 409
    detail = dup.json()["detail"]
    assert detail["error"] == "near-duplicate" and detail["match"] == first.json()["id"]
    # the measures under their names (simdb.Match, the CLI's JSON): Jaccard is "jaccard", not "similarity"
    assert set(detail) == {"error", "message", "match", "jaccard", "distance"}
    assert 0.8 <= detail["jaccard"] < 1 and isinstance(detail["distance"], int)
    assert detail["message"] == f"near-duplicate of {first.json()['id']!r} (Jaccard similarity {detail['jaccard']:.2f})"


def test_fastapi_409_of_a_hamming_collection_names_its_measures(database_url, collection_name):
    """A Hamming collection judged by distance: no Jaccard (None), and "similarity" is Match.similarity."""
    pytest.importorskip("fastapi")
    SimhashIndex(database_url, collection_name, verify=False).close()
    first, dup = _fastapi_scenario(
        _fastapi_app(database_url, collection_name), [{"title": "a", "body": LONG}, {"title": "b", "body": LONG + "!"}],
    )
    assert first.status_code == 201 and dup.status_code == 409
    detail = dup.json()["detail"]
    assert detail["match"] == first.json()["id"] and detail["jaccard"] is None
    assert detail["similarity"] == round(1 - detail["distance"] / 64, 4)


def test_fastapi_nul_character_in_the_body_is_a_422_naming_the_field(database_url, collection_name):
    """The body is the stored meta (jsonb, which cannot hold \\u0000): the client's NUL is a 422 on its field, not a 500."""
    pytest.importorskip("fastapi")
    nul, after = _fastapi_scenario(
        _fastapi_app(database_url, collection_name),
        [{"title": "a\x00b", "body": LONG}, {"title": "a", "body": LONG}],
    )
    assert nul.status_code == 422
    (error,) = nul.json()["detail"]
    assert error["loc"] == ["body", "title"] and error["type"] == "string_nul" and "NUL" in error["msg"]
    assert after.status_code == 201  # nothing was stored by the refused request


def test_fastapi_text_over_the_maximum_size_is_a_422_naming_the_field(database_url, collection_name, monkeypatch):
    """A posted text larger than the index's maximum text size is the client's error: 422 on the field, not a 500."""
    pytest.importorskip("fastapi")
    monkeypatch.setenv("SIMDB_MAX_TEXT_BYTES", "100")
    big, small = _fastapi_scenario(
        _fastapi_app(database_url, collection_name), [{"title": "a", "body": LONG}, {"title": "b", "body": OTHER}],
    )
    assert big.status_code == 422 and small.status_code == 201
    (error,) = big.json()["detail"]
    assert error["loc"] == ["body", "body"] and error["type"] == "string_too_long"
    assert error["msg"] == (f"too long to compare: text is at least {len(LONG.encode()):,} bytes of UTF-8, more than the "
                            "maximum text size of 100 bytes")


@pytest.mark.parametrize("k", [12, -1, "3", True])
def test_validators_refuse_a_bad_k_when_declared(k):
    """A bad k is the app's error, said where the route or form is declared, not a 500 at every request."""
    from simdb.errors import InputError, InvalidTypeError

    adapters = []
    if importlib.util.find_spec("fastapi"):
        from pydantic import BaseModel

        from simdb.fastapi import NotNearDuplicate as FastAPINotNearDuplicate

        class NewPost(BaseModel):
            body: str

        adapters.append(lambda: FastAPINotNearDuplicate(NewPost, text="body", k=k))
    if importlib.util.find_spec("wtforms"):
        from simdb.wtforms import NotNearDuplicate as WTFormsNotNearDuplicate

        adapters.append(lambda: WTFormsNotNearDuplicate(lambda: None, k=k))
    if not adapters:
        pytest.skip("neither fastapi nor wtforms installed")
    for make in adapters:
        with pytest.raises((InputError, InvalidTypeError), match="^k[ =]"):
            make()


def test_fastapi_dependency_on_the_embedded_default(tmp_path, monkeypatch):
    pytest.importorskip("fastapi")
    for var in ("DATABASE_URL", "SIMDB_DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SIMDB_HOME", str(tmp_path))
    codes = [r.status_code for r in _fastapi_scenario(
        _fastapi_app(None, "posts"), [{"title": "a", "body": LONG}, {"title": "b", "body": REWORDED}]
    )]
    assert codes == [201, 409] and (tmp_path / "pgdata").is_dir()


# ------------------------------------------------------------------------------------------------ WTForms
def _flask_app(index):
    pytest.importorskip("flask_wtf")
    from flask import Flask, request
    from flask_wtf import FlaskForm
    from wtforms import StringField, TextAreaField
    from wtforms.validators import DataRequired

    from simdb.wtforms import NotNearDuplicate

    class PostForm(FlaskForm):
        title = StringField("Title", validators=[DataRequired()])
        body = TextAreaField("Body", validators=[DataRequired(), NotNearDuplicate(lambda: index)])

    app = Flask(__name__)
    app.config.update(SECRET_KEY="test", WTF_CSRF_ENABLED=False)

    @app.post("/posts")
    def create_post():
        form = PostForm(request.form)
        if not form.validate():
            return {"errors": form.errors}, 400
        return {"id": form.body.simdb_key}, 201

    return app


def test_wtforms_validator_admits_then_refuses_on_the_field(index):
    client = _flask_app(index).test_client()
    first = client.post("/posts", data={"title": "a", "body": LONG})
    assert first.status_code == 201 and first.json["id"] in index
    dup = client.post("/posts", data={"title": "b", "body": REWORDED})
    assert dup.status_code == 400
    assert dup.json["errors"] == {"body": [f"near-duplicate of {first.json['id']!r} (Jaccard similarity "
                                          f"{index.near(REWORDED)[0].jaccard:.2f})"]}
    assert client.post("/posts", data={"title": "c", "body": OTHER}).status_code == 201


def test_wtforms_validator_stores_nothing_when_another_field_fails(index):
    client = _flask_app(index).test_client()
    assert client.post("/posts", data={"title": "", "body": LONG}).status_code == 400
    assert len(index) == 0
    assert client.post("/posts", data={"title": "now", "body": LONG}).status_code == 201


def test_wtforms_validator_stores_nothing_when_its_own_field_failed_earlier(index):
    """WTForms runs a field's next validator after a ValidationError (Length): the refused text is not stored."""
    pytest.importorskip("flask_wtf")
    from flask import Flask
    from wtforms import Form, TextAreaField
    from wtforms.validators import Length

    from simdb.wtforms import NotNearDuplicate

    class ShortForm(Form):
        body = TextAreaField("Body", validators=[Length(max=100), NotNearDuplicate(index)])

    with Flask(__name__).test_request_context():
        too_long = ShortForm(data={"body": LONG})
        assert not too_long.validate()
        assert too_long.errors == {"body": ["Field cannot be longer than 100 characters."]}
        assert too_long.body.simdb_key is None
    assert len(index) == 0


def test_wtforms_nul_character_in_the_stored_meta_is_a_form_error(index):
    """meta=lambda form: {"title": ...} with a NUL in the title (jsonb cannot hold it): a field error naming
    the title, not a 500, and nothing stored."""
    pytest.importorskip("flask_wtf")
    from flask import Flask
    from wtforms import Form, StringField, TextAreaField

    from simdb.wtforms import NotNearDuplicate

    class PostForm(Form):
        title = StringField("Title")
        body = TextAreaField("Body", validators=[NotNearDuplicate(index, meta=lambda form: {"title": form.title.data})])

    with Flask(__name__).test_request_context():
        form = PostForm(data={"title": "a\x00b", "body": LONG})
        assert not form.validate()
        # on the field the user typed it in; the body says it was not stored
        assert form.errors == {"title": ["must not contain a NUL character (\\u0000)"],
                               "body": ["not stored: title is invalid"]}
    assert len(index) == 0


def test_wtforms_text_over_the_maximum_size_is_a_form_error(database_url, collection_name):
    """A posted text larger than the index's maximum text size: an error on the field, not a 500."""
    with SimhashIndex(database_url, collection_name, max_text_bytes=100) as small_index:
        client = _flask_app(small_index).test_client()
        big = client.post("/posts", data={"title": "a", "body": LONG})
        assert big.status_code == 400
        assert big.json["errors"] == {"body": [f"too long to compare: text is at least {len(LONG.encode()):,} bytes of UTF-8, "
                                               "more than the maximum text size of 100 bytes"]}
        assert len(small_index) == 0


def test_wtforms_validator_on_the_embedded_default(tmp_path, monkeypatch):
    pytest.importorskip("flask_wtf")
    for var in ("DATABASE_URL", "SIMDB_DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SIMDB_HOME", str(tmp_path))
    with SimhashIndex(collection="posts") as index:  # no URL: simdb's embedded server, in tmp_path
        client = _flask_app(index).test_client()
        codes = [client.post("/posts", data={"title": t, "body": b}).status_code
                 for t, b in (("a", LONG), ("b", REWORDED))]
    assert codes == [201, 400] and (tmp_path / "pgdata").is_dir()


# ------------------------------------------------------------------------------------------------ reservations
def test_a_reservation_stores_only_when_committed(index):
    """index.reserve: add_if_unique left uncommitted; rolled back, nothing is stored and the same text gets in."""
    r = reserve(index, "post-1", LONG)
    assert r.inserted and r.held and "post-1" not in index  # not visible before the commit
    r.rollback()
    assert not r.held and len(index) == 0
    with reserve(index, "post-2", LONG) as r2:
        pass
    assert "post-2" in index and not r2.held
    with pytest.raises(NearDuplicateError):
        reserve(index, "post-3", REWORDED)
    with pytest.raises(RuntimeError), reserve(index, "post-4", OTHER):
        raise RuntimeError("the request failed")
    assert len(index) == 1 and "post-2" in index


def test_concurrent_reservations_store_exactly_one(index):
    """8 identical texts reserved at once: the first holds its locks until it ends; committed, the 7
    others are refused; rolled back, the next one gets in (and is then the only one)."""
    for first_commits in (True, False):
        index.clear()
        barrier = threading.Barrier(8)
        held: list = []
        refused: list = []
        lock = threading.Lock()

        def submit(i):
            barrier.wait()
            try:
                r = reserve(index, f"k{i}", LONG)
            except NearDuplicateError:
                with lock:
                    refused.append(i)
                return
            with lock:
                first = not held
                held.append(r)
            if first and not first_commits:
                r.rollback()
            else:
                r.commit()

        threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(index) == 1 and len(refused) == (7 if first_commits else 6)


# ------------------------------------------------------------------------------------------------ Flask-WTF requests
def _flask_wtf_app(index, *, csrf=False, later_field=False):
    """A Flask-WTF posts app as docs/flask.md writes it, with the ways a request fails after the text's
    validator: the CSRF check (Flask-WTF runs it after the form's fields), a later field, a view that
    refuses (403) or raises; and an edit route naming its own key."""
    pytest.importorskip("flask_wtf")
    from flask import Flask, abort, request
    from flask_wtf import FlaskForm
    from flask_wtf.csrf import generate_csrf
    from wtforms import StringField, TextAreaField
    from wtforms.validators import DataRequired

    from simdb.flask import SimDB
    from simdb.wtforms import NotNearDuplicate

    simdb_ext = SimDB()

    def key(form):
        return request.view_args.get("post_id") or uuid.uuid4().hex

    class PostForm(FlaskForm):
        title = StringField("Title", validators=[DataRequired()])
        body = TextAreaField("Body", validators=[
            NotNearDuplicate(lambda: index, key=key, meta=lambda form: {"title": form.title.data})])
        if later_field:
            tag = StringField("Tag", validators=[DataRequired()])

    app = Flask(__name__)
    app.config.update(SECRET_KEY="test", WTF_CSRF_ENABLED=csrf)
    simdb_ext.init_app(app)

    @app.get("/token")
    def token():
        return {"csrf_token": generate_csrf()}

    @app.post("/posts")
    @app.put("/posts/<post_id>")
    def save_post(post_id=None):
        form = PostForm()
        if not form.validate_on_submit():
            return {"errors": form.errors}, 400
        if request.args.get("fail") == "403":
            abort(403)
        if request.args.get("fail") == "raise":
            raise RuntimeError("the view failed after the form was valid")
        return {"id": form.body.simdb_key}, 201 if post_id is None else 200

    return app


def test_flask_wtf_csrf_failure_stores_nothing_and_the_retry_is_accepted(index):
    client = _flask_wtf_app(index, csrf=True).test_client()
    refused = client.post("/posts", data={"title": "a", "body": LONG})  # no token
    assert refused.status_code == 400 and "csrf_token" in refused.json["errors"]
    assert len(index) == 0
    token = client.get("/token").json["csrf_token"]
    retry = client.post("/posts", data={"title": "a", "body": LONG, "csrf_token": token})
    assert retry.status_code == 201 and retry.json["id"] in index and len(index) == 1


def test_flask_wtf_later_field_failure_stores_nothing(index):
    client = _flask_wtf_app(index, later_field=True).test_client()
    refused = client.post("/posts", data={"title": "a", "body": LONG})  # the tag, after the body, is missing
    assert refused.status_code == 400 and list(refused.json["errors"]) == ["tag"]
    assert len(index) == 0
    assert client.post("/posts", data={"title": "a", "body": LONG, "tag": "t"}).status_code == 201
    assert len(index) == 1


@pytest.mark.parametrize("fail", ["403", "raise"])
def test_flask_wtf_view_that_fails_stores_nothing(index, fail):
    app = _flask_wtf_app(index)
    app.config["PROPAGATE_EXCEPTIONS"] = False  # a raising view answers 500, as in production
    client = app.test_client()
    failed = client.post(f"/posts?fail={fail}", data={"title": "a", "body": LONG})
    assert failed.status_code == (403 if fail == "403" else 500)
    assert len(index) == 0
    assert client.post("/posts", data={"title": "a", "body": LONG}).status_code == 201


def test_flask_wtf_view_that_raises_under_testing_stores_nothing(index):
    """TESTING propagates the exception: no response is made, and SimDB's teardown rolls the text back."""
    app = _flask_wtf_app(index)
    app.config["TESTING"] = True
    with pytest.raises(RuntimeError):
        app.test_client().post("/posts?fail=raise", data={"title": "a", "body": LONG})
    assert len(index) == 0
    assert app.test_client().post("/posts", data={"title": "a", "body": LONG}).status_code == 201


def test_flask_wtf_concurrent_identical_posts_store_one(index):
    app = _flask_wtf_app(index)
    barrier = threading.Barrier(8)
    codes: list[int] = []

    def post():
        client = app.test_client()
        barrier.wait()
        codes.append(client.post("/posts", data={"title": "a", "body": LONG}).status_code)

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [201] + [400] * 7 and len(index) == 1


def test_flask_wtf_edits_are_not_their_own_duplicates(index):
    client = _flask_wtf_app(index).test_client()
    first = client.post("/posts", data={"title": "a", "body": LONG}).json["id"]
    other = client.post("/posts", data={"title": "b", "body": OTHER}).json["id"]
    assert client.put(f"/posts/{first}", data={"title": "a", "body": LONG}).status_code == 200  # unchanged
    assert client.put(f"/posts/{first}", data={"title": "a", "body": REWORDED}).status_code == 200  # a typo fixed
    into_other = client.put(f"/posts/{first}", data={"title": "a", "body": OTHER + " "})
    assert into_other.status_code == 400 and into_other.json["errors"]["body"][0].startswith(
        f"near-duplicate of {other!r}")
    assert len(index) == 2 and index.get(first).meta == {"title": "a"}


@pytest.mark.parametrize(("title", "body", "field", "message"), [
    ("a", "x\x00y " + LONG, "body", "must not contain a NUL character (\\u0000)"),
    ("a", "   ", "body", "must not be empty"),
    ("a\x00b", LONG, "title", "must not contain a NUL character (\\u0000)"),
])
def test_flask_wtf_bad_input_is_an_error_on_its_field(index, title, body, field, message):
    client = _flask_wtf_app(index).test_client()
    refused = client.post("/posts", data={"title": title, "body": body})
    assert refused.status_code == 400 and refused.json["errors"][field] == [message]
    assert len(index) == 0


# ------------------------------------------------------------------------------------------------ FastAPI requests
def _fastapi_failing_app(database, collection):
    """docs/fastapi.md's app with the ways a request fails after the text's dependency: a dependency
    declared after it that answers 401, a path operation that raises 503; and an edit route."""
    from contextlib import asynccontextmanager

    from fastapi import Depends, FastAPI, Header, HTTPException
    from pydantic import BaseModel

    from simdb.aio import AsyncSimhashIndex
    from simdb.fastapi import Admitted, NotNearDuplicate

    class NewPost(BaseModel):
        title: str
        body: str

    @asynccontextmanager
    async def lifespan(app):
        async with AsyncSimhashIndex(database, collection) as index:
            app.state.simdb_index = index
            yield

    app = FastAPI(lifespan=lifespan)

    def user(authorization: Annotated[str | None, Header()] = None):
        if authorization != "yes":
            raise HTTPException(401, "who are you?")
        return "ann"

    @app.post("/posts", status_code=201)
    async def create_post(admitted: Annotated[Admitted, Depends(NotNearDuplicate(NewPost, text="body"))],
                          who: Annotated[str, Depends(user)], fail: bool = False):
        if fail:
            raise HTTPException(503, "try again later")
        return {"id": admitted.key}

    edit = NotNearDuplicate(NewPost, text="body", key=lambda item, request: request.path_params["post_id"])

    @app.put("/posts/{post_id}")
    async def edit_post(post_id: str, admitted: Annotated[Admitted, Depends(edit)]):
        return {"id": admitted.key}

    return app


def _fastapi_requests(app, requests, *, concurrent=False):
    """``requests``: (method, path, json, headers) through the app, one after another or all at once."""
    httpx = pytest.importorskip("httpx")

    async def run():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                calls = [client.request(m, p, json=j, headers=h) for m, p, j, h in requests]
                if concurrent:
                    return await asyncio.gather(*calls)
                return [await c for c in calls]

    return asyncio.run(run())


AUTH = {"authorization": "yes"}


def test_fastapi_failed_requests_store_nothing_and_the_retry_is_accepted(database_url, collection_name, index):
    pytest.importorskip("fastapi")
    post = {"title": "a", "body": LONG}
    unauthorised, failing, retry = _fastapi_requests(_fastapi_failing_app(database_url, collection_name), [
        ("POST", "/posts", post, {}), ("POST", "/posts?fail=true", post, AUTH), ("POST", "/posts", post, AUTH)])
    assert unauthorised.status_code == 401 and failing.status_code == 503
    assert retry.status_code == 201 and len(index) == 1 and retry.json()["id"] in index


def test_fastapi_concurrent_identical_posts_store_one(database_url, collection_name, index):
    pytest.importorskip("fastapi")
    answers = _fastapi_requests(_fastapi_failing_app(database_url, collection_name),
                                [("POST", "/posts", {"title": "a", "body": LONG}, AUTH)] * 8, concurrent=True)
    assert sorted(a.status_code for a in answers) == [201] + [409] * 7 and len(index) == 1


def test_fastapi_edits_are_not_their_own_duplicates(database_url, collection_name, index):
    pytest.importorskip("fastapi")
    index.add("post-1", LONG, meta={"title": "a", "body": LONG})
    index.add("post-2", OTHER, meta={"title": "b", "body": OTHER})
    same, typo, into_other = _fastapi_requests(_fastapi_failing_app(database_url, collection_name), [
        ("PUT", "/posts/post-1", {"title": "a", "body": LONG}, {}),
        ("PUT", "/posts/post-1", {"title": "a", "body": REWORDED}, {}),
        ("PUT", "/posts/post-1", {"title": "a", "body": OTHER + " "}, {})])
    assert same.status_code == 200 and typo.status_code == 200
    assert into_other.status_code == 409 and into_other.json()["detail"]["match"] == "post-2"
    assert len(index) == 2 and index.get("post-1").meta["body"] == REWORDED


@pytest.mark.parametrize(("post", "loc", "kind"), [
    ({"title": "a", "body": ""}, ["body", "body"], "string_too_short"),
    ({"title": "a", "body": " \n "}, ["body", "body"], "string_too_short"),
    ({"title": "a", "body": "x\x00y " + LONG}, ["body", "body"], "string_nul"),
    ({"title": "a\x00b", "body": LONG}, ["body", "title"], "string_nul"),
])
def test_fastapi_bad_input_is_a_422_on_its_field(database_url, collection_name, index, post, loc, kind):
    pytest.importorskip("fastapi")
    (answer,) = _fastapi_requests(_fastapi_failing_app(database_url, collection_name), [("POST", "/posts", post, AUTH)])
    assert answer.status_code == 422
    (error,) = answer.json()["detail"]
    assert error["loc"] == loc and error["type"] == kind
    assert len(index) == 0
