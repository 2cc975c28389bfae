"""A WTForms validator (Flask-WTF forms) that refuses near-duplicate texts, atomically.

``NotNearDuplicate(lambda: simdb_ext.index)`` in a field's ``validators=[...]`` *admits* the text
into the simdb collection (:func:`simdb.validators.admit`, i.e. ``add_if_unique``) and refuses a
near-duplicate with ``"near-duplicate of 'KEY' (Jaccard similarity 0.93)"`` on the field.

Why it stores instead of checking: a check, then an insert later in the view, lets two
concurrent near-identical posts both in; ``add_if_unique`` is one transaction, so exactly one
is admitted. The key it stored the text under is ``field.simdb_key`` (the view keeps it, e.g.
as the post's id). Why it skips when another field of the form, or an earlier validator of its
own field (``Length``), already failed: the form is refused anyway and an admitted text would
then refuse its own resubmission; so put the text field last, this validator last in its list, and if the view refuses a valid form for another reason, give the text back with
:func:`simdb.validators.release`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from wtforms.validators import ValidationError

from simdb.core.validate import check_k
from simdb.errors import InputTooLargeError
from simdb.validators import NearDuplicateError, admit, nul_paths, too_large_message

__all__ = ["NotNearDuplicate"]


class NotNearDuplicate:
    """WTForms validator: admit the field's text into ``index`` or refuse it as a near-duplicate.

    ``index``: a :class:`simdb.SimhashIndex`, or a callable returning one at validation time
    (``lambda: simdb_ext.index`` with :class:`simdb.flask.SimDB`, which needs the app context).
    ``key(form)``: the key to store under (default a random hex id); ``meta(form)``: the JSON
    meta to store with it (default None); ``k``: the Hamming radius of a Hamming collection.
    """

    def __init__(
        self, index: Any, *, k: int = 3, key: Callable[[Any], str] | None = None,
        meta: Callable[[Any], Any] | None = None, message: str | None = None,
    ):
        self.index = index
        self.k = check_k(k)  # when the form is declared: a bad k would otherwise fail every submission
        self.key = key
        self.meta = meta
        self.message = message

    def _index(self) -> Any:
        return self.index if hasattr(self.index, "add_if_unique") else self.index()

    def __call__(self, form: Any, field: Any) -> None:
        field.simdb_key = None
        # field.errors: an earlier validator of this field that raised ValidationError (Length, Regexp);
        # WTForms goes on down the chain after it, and the refused form would leave the text stored
        if not isinstance(field.data, str) or field.errors or any(f.errors for f in form if f is not field):
            return
        key = self.key(form) if self.key is not None else uuid.uuid4().hex
        meta = self.meta(form) if self.meta is not None else None
        if nul_paths(meta):  # jsonb cannot store it: the user's NUL is a form error, not a 500
            named = [f.name for f in form if isinstance(f.data, str) and "\x00" in f.data]
            if named:
                raise ValidationError(f"{', '.join(named)}: must not contain a NUL character (\\u0000)")
        try:
            admit(self._index(), key, field.data, k=self.k, meta=meta)
        except NearDuplicateError as exc:
            raise ValidationError(self.message or str(exc)) from None
        except InputTooLargeError as exc:  # the user's text is over the index's maximum text size
            raise ValidationError(too_large_message(exc)) from None
        field.simdb_key = key
