"""Example Flask app: a posts API that refuses near-duplicate posts.

POST /posts {"title": ..., "body": ...}
    201 + the new post, or 409 + the existing post it nearly duplicates
    (Hamming distance of the SimHash fingerprints <= SIMDB_K).
GET /posts/<id>
    the post.

Run it (README.md beside this file shows the three requests)::

    flask --app examples/flask_app/app.py init-db
    flask --app examples/flask_app/app.py run

With no ``SQLALCHEMY_DATABASE_URI`` (or ``DATABASE_URL``) the app uses simdb's
embedded PostgreSQL (data in ``$SIMDB_HOME``); ``postgresql://`` URLs are routed to
psycopg 3. The app needs none of simdb's own tables (``migrate=False``).

The fingerprint lives on the app's own ``posts`` table (``SimhashMixin``: ``fp``
plus the generated, indexed block columns ``b0..b3``); the duplicate check is one
indexed query. A transaction-level advisory lock makes check-then-insert safe
when two near-identical posts arrive at once.
"""

from __future__ import annotations

import os

from flask import Flask, abort, jsonify, request
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import Text, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from simdb.database import resolve_url
from simdb.flask import SimDB
from simdb.sqlalchemy import SimhashMixin


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)
simdb_ext = SimDB(db=db)


class Post(SimhashMixin, db.Model):
    __tablename__ = "posts"
    __simdb_text__ = "body"  # fp is computed from the body on insert/update

    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    body: Mapped[str] = mapped_column(Text)

    def to_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "body": self.body, "fp": f"{self.fp:016x}" if self.fp is not None else None}


def create_app(config: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config["SIMDB_K"] = 3
    app.config.update(config or {})
    if not app.config.get("SQLALCHEMY_DATABASE_URI"):
        configured = os.environ.get("SQLALCHEMY_DATABASE_URI") or os.environ.get("DATABASE_URL") or None
        app.config["SQLALCHEMY_DATABASE_URI"] = resolve_url(configured, migrate=False)[0]
    db.init_app(app)
    simdb_ext.init_app(app)

    @app.cli.command("init-db")
    def init_db():
        db.create_all()

    @app.post("/posts")
    def create_post():
        data = request.get_json(silent=True) or {}
        title, body = data.get("title"), data.get("body")
        if not isinstance(title, str) or not isinstance(body, str):
            return jsonify(error="title and body (strings) are required"), 400
        # serialise concurrent submissions so two near-identical posts cannot both get in
        db.session.execute(select(func.pg_advisory_xact_lock(func.hashtext("posts-near-duplicate-check"))))
        fp = Post.fingerprint_text(body)
        if fp is not None:
            match = db.session.execute(simdb_ext.near_duplicates(Post, fp).limit(1)).first()
            if match is not None:
                post, distance = match
                db.session.rollback()
                return jsonify(error="near-duplicate", distance=distance, match=post.to_dict()), 409
        post = Post(title=title, body=body, fp=fp)
        db.session.add(post)
        db.session.commit()
        return jsonify(post.to_dict()), 201

    @app.get("/posts/<int:post_id>")
    def get_post(post_id: int):
        post = db.session.get(Post, post_id)
        if post is None:
            abort(404)
        return jsonify(post.to_dict())

    return app
