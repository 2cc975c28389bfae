"""simdb.validators (the shared refusal) and its FastAPI and WTForms (Flask-WTF) adapters, against PostgreSQL.

The Django and Django REST framework adapters: tests/test_django_validators.py.
"""

# no "from __future__ import annotations": FastAPI reads the local endpoint's annotations as objects
import asyncio
import importlib.util
import threading
from typing import Annotated

import pytest

from simdb import SimhashIndex
from simdb.validators import NearDuplicateError, admit, measures, refusal_message, release

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
        assert form.errors == {"body": ["title: must not contain a NUL character (\\u0000)"]}
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
