"""examples/fastapi_app with an async client (httpx.AsyncClient + ASGITransport), real PostgreSQL."""

from __future__ import annotations

import asyncio
import importlib.util
import random
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from simdb import Fingerprinter  # noqa: E402
from simdb.core.bits import hamming  # noqa: E402

APP = Path(__file__).resolve().parents[1] / "examples" / "fastapi_app" / "app.py"
LONG = (
    "PostgreSQL is a powerful open source object relational database system with over thirty years of active "
    "development that has earned it a strong reputation for reliability, feature robustness and performance."
)


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("simdb_fastapi_example", APP)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)  # builds the module-level app too (nothing connects before startup)
    yield module
    sys.modules.pop(spec.name, None)


async def _with_client(app, fn):
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await fn(client)


def test_new_duplicate_and_unrelated_posts(example, database_url, collection_name):
    app = example.create_app(database_url, collection_name)

    async def scenario(client):
        first = await client.post("/posts", json={"title": "db", "body": LONG})
        assert first.status_code == 201
        post = first.json()
        assert post["title"] == "db" and post["body"] == LONG and len(post["fp"]) == 16
        dup = await client.post("/posts", json={"title": "again", "body": LONG.upper() + "!!"})
        assert dup.status_code == 409
        assert dup.json()["match"] == post and dup.json()["distance"] == 0
        other = await client.post("/posts", json={"title": "cats", "body": "Cats sleep most of the day in sunny spots."})
        assert other.status_code == 201
        assert (await client.get(f"/posts/{post['id']}")).json() == post
        assert (await client.get("/posts/nope")).status_code == 404
        assert (await client.post("/posts", json={"title": "no body"})).status_code == 422

    asyncio.run(_with_client(app, scenario))


def _families(n_families: int, size: int, k: int) -> list[list[str]]:
    """Families of cosmetic variants of one random text; families pairwise more than k apart."""
    rng = random.Random(16)
    vocab = [f"word{i}" for i in range(3000)]
    fper = Fingerprinter()
    families, fps = [], []
    while len(families) < n_families:
        words = [rng.choice(vocab) for _ in range(40)]
        base = " ".join(words)
        fp = fper.fingerprint(base)
        if any(hamming(fp, other) <= k for other in fps):
            continue
        variants = [base, base.upper(), base + "!", "  " + base.replace(" ", "  "), base.title() + "."][:size]
        assert all(hamming(fper.fingerprint(v), fp) <= k for v in variants)
        families.append(variants)
        fps.append(fp)
    return families


def test_200_concurrent_requests_admit_exactly_one_per_family(example, database_url, collection_name):
    families = _families(40, 5, 3)
    jobs = [(f, body) for f, fam in enumerate(families) for body in fam]
    random.Random(3).shuffle(jobs)
    assert len(jobs) == 200
    app = example.create_app(database_url, collection_name)

    async def scenario(client):
        return await asyncio.gather(*(client.post("/posts", json={"title": f"fam{f}", "body": body}) for f, body in jobs))

    responses = asyncio.run(_with_client(app, scenario))
    admitted: dict[int, list[str]] = {}
    for (f, _), r in zip(jobs, responses):
        assert r.status_code in (201, 409), r.text
        if r.status_code == 201:
            admitted.setdefault(f, []).append(r.json()["id"])
        else:
            assert r.json()["match"]["title"] == f"fam{f}"  # refused because of its own family
    assert sorted(admitted) == list(range(len(families)))
    assert all(len(ids) == 1 for ids in admitted.values())


def test_runs_with_no_database_url_on_the_embedded_server(example, tmp_path, monkeypatch):
    """The app as shipped (``app``): no URL anywhere -> simdb's embedded PostgreSQL (here in tmp_path)."""
    for var in ("DATABASE_URL", "SIMDB_DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SIMDB_HOME", str(tmp_path))

    async def scenario(client):
        assert (await client.post("/posts", json={"title": "a", "body": LONG})).status_code == 201
        assert (await client.post("/posts", json={"title": "b", "body": LONG + "."})).status_code == 409

    asyncio.run(_with_client(example.create_app(), scenario))
    assert (tmp_path / "pgdata").is_dir()


def test_setup_mistakes_are_named_not_attribute_errors():
    """A ``text=`` naming no field of the body fails when the route is defined; an app whose lifespan
    set no collection gets an error saying what to set, not Starlette's bare AttributeError."""
    from fastapi import Depends, FastAPI
    from pydantic import BaseModel

    from simdb.errors import InvalidArgumentError
    from simdb.fastapi import NotNearDuplicate

    class NewPost(BaseModel):
        body: str

    with pytest.raises(InvalidArgumentError, match=r"text: NewPost has no field 'content' \(its fields: body\)"):
        NotNearDuplicate(NewPost, text="content")
    app = FastAPI()  # no lifespan, no index=

    @app.post("/posts")
    async def create(admitted=Depends(NotNearDuplicate(NewPost, text="body"))):  # noqa: B008
        return {}

    async def scenario(client):
        with pytest.raises(InvalidArgumentError, match=r"index: .*app\.state\.simdb_index"):
            await client.post("/posts", json={"body": "hello there"})

    asyncio.run(_with_client(app, scenario))
