"""Seconds per request of one large post through each web adapter, against fingerprinting and
sketching the same text once (the floor: what the index must compute anyway).

Each post is a fresh text (no refusal), ``--mb`` MB of random words; the figure is the median of
``--repeat`` requests. Flask (Flask-WTF form, ``simdb.wtforms``) and FastAPI (``simdb.fastapi``) run
the apps of docs/flask.md and docs/fastapi.md through their test clients, on the database of
``$SIMDB_DATABASE_URL`` (else the embedded server). Example::

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_web_post.py --mb 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
import uuid
from contextlib import asynccontextmanager
from typing import Annotated
from urllib.parse import urlencode

import httpx
from fastapi import Depends, FastAPI
from flask import Flask
from flask_wtf import FlaskForm
from pydantic import BaseModel
from wtforms import StringField, TextAreaField

from simdb import Fingerprinter, SimhashIndex
from simdb.aio import AsyncSimhashIndex
from simdb.fastapi import Admitted, NotNearDuplicate
from simdb.flask import SimDB
from simdb.wtforms import NotNearDuplicate as FormNotNearDuplicate

COLLECTION = "bench-web-post"


def texts(mb: float, n: int, seed: int = 1) -> list[str]:
    """``n`` ASCII texts of ``mb`` MB, each in an alphabet of its own, 12 of the 36 letters and digits
    (texts that long in one alphabet share most character 4-grams: near-duplicates, refused). ASCII: a
    form post percent-encodes every other byte, and Werkzeug's decoding of that would be the figure."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    out = []
    for _ in range(n):
        alphabet = rng.sample(letters, 12)
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(2, 10))) for _ in range(50_000)]
        parts, size = [], 0
        while size < mb * 1_000_000:
            chunk = " ".join(rng.choices(words, k=2_000)) + "\n"
            parts.append(chunk)
            size += len(chunk)
        out.append("".join(parts))
    return out


def timed(fn, items) -> float:
    seconds = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        seconds.append(time.perf_counter() - t0)
    return statistics.median(seconds)


def floor(index: SimhashIndex, items: list[str]) -> dict:
    fingerprinter, verifier = Fingerprinter(), index.rule.verifier
    return {
        "fingerprint + sketch": timed(lambda t: (fingerprinter.fingerprint(t), verifier.sketch(t)), items),
        "index features (one pass)": timed(lambda t: index.rule.text_features(index.fingerprinter, t), items),
    }


def flask_app() -> tuple[Flask, SimDB]:
    ext = SimDB()

    class PostForm(FlaskForm):
        title = StringField("Title")
        body = TextAreaField("Body", validators=[FormNotNearDuplicate(lambda: ext.index)])

    app = Flask(__name__)
    app.config.update(SECRET_KEY="x", WTF_CSRF_ENABLED=False, SIMDB_COLLECTION=COLLECTION,
                      MAX_FORM_MEMORY_SIZE=64 * 1024 * 1024)
    ext.init_app(app)

    @app.post("/posts")
    def create_post():
        form = PostForm()
        if not form.validate_on_submit():
            return {"errors": form.errors}, 400
        return {"id": form.body.simdb_key}, 201

    return app, ext


class NewPost(BaseModel):
    title: str
    body: str


def fastapi_app() -> FastAPI:
    @asynccontextmanager
    async def lifespan(app):
        async with AsyncSimhashIndex(collection=COLLECTION) as index:
            app.state.simdb_index = index
            yield

    app = FastAPI(lifespan=lifespan)

    @app.post("/posts", status_code=201)
    async def create_post(admitted: Annotated[Admitted, Depends(NotNearDuplicate(NewPost, text="body"))]):
        return {"id": admitted.key}

    return app


def fastapi_seconds(items: list[str]) -> float:
    app = fastapi_app()

    async def run() -> float:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=600) as client:
                seconds = []
                for t in items:  # encoded before the clock starts: the client's work is not the app's
                    body = json.dumps({"title": uuid.uuid4().hex, "body": t}).encode()
                    t0 = time.perf_counter()
                    r = await client.post("/posts", content=body, headers={"content-type": "application/json"})
                    seconds.append(time.perf_counter() - t0)
                    assert r.status_code == 201, r.text[:300]
                return statistics.median(seconds)

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    items = texts(args.mb, args.repeat)
    with SimhashIndex(collection=COLLECTION) as index:
        index.clear()
        out = floor(index, items)
    app, ext = flask_app()
    client = app.test_client()

    def post(body: bytes) -> None:
        r = client.post("/posts", data=body, content_type="application/x-www-form-urlencoded")
        assert r.status_code == 201, r.get_data(as_text=True)[:300]

    # encoded before the clock starts: the test client's urlencode is not the app's work
    out["flask (Flask-WTF + simdb.wtforms)"] = timed(post, [urlencode({"title": "t", "body": t}).encode() for t in items])
    with app.app_context():
        ext.index.clear()
    ext.close(app)
    out["fastapi (simdb.fastapi)"] = fastapi_seconds(items)
    print(json.dumps({"mb": args.mb, "repeat": args.repeat, "seconds": {k: round(v, 3) for k, v in out.items()}},
                     indent=2))


if __name__ == "__main__":
    main()
