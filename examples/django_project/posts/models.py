from django.db import models

from simdb.django.models import SimhashModel


class Post(SimhashModel):
    """A post; ``fp`` (and the indexed blocks b0..b3) are computed from ``body`` on save."""

    simhash_source = "body"

    title = models.CharField(max_length=200)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def to_dict(self) -> dict:
        return {
            "id": self.pk,
            "title": self.title,
            "body": self.body,
            "fp": None if self.fp is None else f"{self.fp:016x}",
        }
