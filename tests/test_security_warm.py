"""A client of the user's own uid cannot crash the warm process with a malformed request (issue 33, item 2).

The audit: a request whose JSON was not an object (``[1,2,3]``) raised AttributeError
in ``_serve_one``, uncaught, so the warm process exited and removed its socket for every
client; JSON nested past the recursion limit raised RecursionError. Each malformed
request is now answered ``refused bad request`` on its own connection, and the next
well-formed connection is still served.
"""

from __future__ import annotations

import json
import os
import socket

import pytest

from simdb.cli import warm_home
from simdb.cli.warm import _serve_one

BAD = [
    b"[1,2,3]",
    b"\"a string\"",
    b"[" * 20_000 + b"]" * 20_000,  # RecursionError in the decoder (fits the socket's buffer)
    b"{\"env\": 1, \"argv\": [], \"cwd\": \"/\", \"umask\": 18, \"streams\": [null, null, null]}",
    b"{\"env\": {}, \"argv\": [1], \"cwd\": \"/\", \"umask\": 18, \"streams\": [null, null, null]}",
    b"{\"env\": {}, \"argv\": [], \"cwd\": \"/\", \"umask\": \"18\", \"streams\": [null, null, null]}",
    b"not json",
]


def _send(path: str, body: bytes) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(path)
    fds = [os.open(os.devnull, os.O_RDWR) for _ in range(3)]
    try:
        socket.send_fds(client, [len(body).to_bytes(8, "big") + body], fds)
    finally:
        for fd in fds:
            os.close(fd)
    client.settimeout(10)
    return client


@pytest.fixture
def listener(tmp_path):
    path = str(tmp_path / "s")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(4)
    yield sock, path
    sock.close()


@pytest.mark.parametrize("body", BAD, ids=range(len(BAD)))
def test_a_malformed_request_is_answered_and_crashes_nothing(listener, body):
    sock, path = listener
    client = _send(path, body)
    assert _serve_one(sock, {}) is None  # no exception, no fork
    assert client.recv(64) == b"refused bad request\n"
    client.close()


def test_the_serving_loop_survives_any_exception_of_one_connection(listener, monkeypatch):
    sock, path = listener
    client = _send(path, b"{}")
    monkeypatch.setattr(warm_home, "peer_uid", lambda s: 1 / 0)  # a bug in one connection's handling
    assert _serve_one(sock, {}, ()) is None
    client.close()


def test_a_well_formed_request_of_other_code_is_still_told_so(listener):
    sock, path = listener
    request = {"token": ["other"], "env": {}, "argv": [], "cwd": "/", "umask": 18, "streams": [None, None, None]}
    client = _send(path, json.dumps(request).encode())
    with pytest.raises(SystemExit):
        _serve_one(sock, {})
    assert client.recv(64) == b"refused other code\n"
    client.close()
