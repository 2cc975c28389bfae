"""Example FastAPI app: a posts API that refuses near-duplicate posts (async all the way).

POST /posts {"title": ..., "body": ...}
    201 + the new post, or 409 + the stored post it nearly duplicates
    (Hamming distance of the SimHash fingerprints <= k, default 3).
GET /posts/{id}
    the post, or 404.

Run it (no database URL needed: simdb starts its embedded PostgreSQL)::

    pip install "simdb[fastapi]" uvicorn
    uvicorn --app-dir examples/fastapi_app app:app
    # or against your own server: DATABASE_URL=postgresql://user:pass@host/db uvicorn ...

The posts live in a simdb collection (key = post id, meta = title and body), and the
check-then-insert is ``AsyncSimhashIndex.add_if_unique``: one transaction with advisory locks
on the fingerprint's block values, so of two near-identical posts arriving at once exactly one
gets in, while unrelated posts never wait for each other.
"""

from __future__ import annotations

import os
import uuid
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from simdb.aio import AsyncSimhashIndex


class NewPost(BaseModel):
    title: str
    body: str


def _post(key: str, fp: int | None, meta: dict) -> dict:
    return {"id": key, "title": meta["title"], "body": meta["body"], "fp": None if fp is None else f"{fp:016x}"}


def create_app(database: str | None = None, collection: str = "posts", k: int = 3) -> FastAPI:
    """The app; ``database`` defaults to ``DATABASE_URL``, then simdb's own default (embedded)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with AsyncSimhashIndex(database or os.environ.get("DATABASE_URL"), collection) as index:
            app.state.index = index
            yield

    app = FastAPI(title="posts without near-duplicates", lifespan=lifespan)

    @app.post("/posts", status_code=201)
    async def create_post(post: NewPost, request: Request):
        index: AsyncSimhashIndex = request.app.state.index
        key = uuid.uuid4().hex
        meta = {"title": post.title, "body": post.body}
        result = await index.add_if_unique(key, post.body, k=k, meta=meta)
        if not result.inserted:
            best = result.matches[0]
            return JSONResponse(
                {"error": "near-duplicate", "distance": best.distance, "match": _post(best.key, best.fp, best.meta)},
                status_code=409,
            )
        entry = await index.get(key)
        return _post(key, entry.fp, entry.meta)

    @app.get("/posts/{post_id}")
    async def get_post(post_id: str, request: Request):
        entry = await request.app.state.index.get(post_id)
        if entry is None:
            raise HTTPException(status_code=404, detail="no such post")
        return _post(entry.key, entry.fp, entry.meta)

    return app


app = create_app()
