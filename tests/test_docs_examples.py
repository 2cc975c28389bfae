"""Every code example in README.md and docs/**/*.md runs here, against a real PostgreSQL.

Why: examples are what people copy, and a wrong one (a claimed distance the code does not
give, a renamed argument) misleads more than a missing one. So each Markdown file is run
top to bottom like a notebook, against its own fresh, migrated database:

- ```python blocks run in order in one namespace per file. A block whose first line is a file name
  (``# app.py``) makes that namespace importable under the name (``from app import create_app`` in
  the page's ``# test_app.py`` block runs as a reader's two files would). ``SIMDB_DATABASE_URL`` names the
  file's database, so ``SimhashIndex()`` (the embedded default in real use) lands there, and
  the working directory is a temporary one with ``examples/`` linked in.
  A ``# -> EXPECTED`` comment on a statement is its expected output: the repr of an
  expression's value, or what the statement prints (one comment per printed line), or
  ``# -> raises ErrorName: message``. ``...`` in EXPECTED matches anything.
- ```sql blocks run statement by statement (autocommit) on the same database; a
  ``-- -> a | b`` comment in a statement is an expected result row.
- A ```bash / ```sh / ```console block with a command starting ``simdb `` runs through bash,
  command by command in the same directory (in ``console`` blocks only the ``$ `` lines),
  with ``simdb`` calling this interpreter's CLI. A non-zero exit fails the example unless a
  ``simdb`` line says ``# exit N``; a ``# -> `` comment is that command's expected output.
- A ```text block right after a runnable block is the whole expected output of that block.
- ``<!-- skip-test: reason -->`` on the line before a fence opts that block out (pip
  installs, a server of your own, a cluster); the reason is required.
- ``<!-- requires: flask_wtf wtforms -->`` anywhere in a file skips the whole file when one of
  those modules does not import (an optional extra the suite may lack), rather than failing it.

The pages of ``RERUN_PAGES`` also run twice on one database, as a user runs a page again on the
embedded server, whose data persists: the second run must give the same output.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import io
import os
import re
import subprocess
import sys
import tokenize
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy.pool import NullPool

from simdb.database import embedded_url
from simdb.embedded import stop_server

REPO = Path(__file__).resolve().parents[1]
PY_LANGS = {"python", "py", "python3"}
SQL_LANGS = {"sql"}
SH_LANGS = {"bash", "console", "sh", "shell"}
OUTPUT_LANGS = {"text", "output"}
SKIP_RE = re.compile(r"^\s*<!--\s*skip-test:\s*(.*?)\s*-->\s*$")
REQUIRES_RE = re.compile(r"^\s*<!--\s*requires:\s*([\w. ]+?)\s*-->\s*$", re.M)
FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None = None
    expected: str | None = None  # a following ```text block
    checks: int = field(default=0)  # output comparisons made when run

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path}:{self.line}"


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def parse_blocks(path: Path, text: str | None = None) -> list[Block]:
    """Fenced blocks of a Markdown file, with skip markers and output blocks attached."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    blocks: list[Block] = []
    i = 0
    last_runnable: Block | None = None
    pending_skip: tuple[int, str] | None = None
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        s = SKIP_RE.match(lines[i])
        if s:
            if not s.group(1):
                raise AssertionError(f"{path}:{i + 1}: skip-test needs a reason")
            pending_skip = (i, s.group(1))
            i += 1
            continue
        if not m:
            if lines[i].strip():
                if pending_skip is not None:
                    raise AssertionError(f"{path}:{pending_skip[0] + 1}: skip-test is not right before a code block")
                last_runnable = None
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        i += 1
        code = "\n".join(body) + "\n"
        skip = None
        if pending_skip is not None:
            if pending_skip[0] != start - 1:
                raise AssertionError(f"{path}:{pending_skip[0] + 1}: skip-test is not right before a code block")
            skip = pending_skip[1]
            pending_skip = None
        if lang in OUTPUT_LANGS and last_runnable is not None:
            last_runnable.expected = code
            last_runnable = None
            continue
        block = Block(path, start + 1, lang, code, skip)
        blocks.append(block)
        last_runnable = block if lang in PY_LANGS | SQL_LANGS | SH_LANGS and skip is None else None
    if pending_skip is not None:
        raise AssertionError(f"{path}:{pending_skip[0] + 1}: skip-test is not right before a code block")
    return blocks


def shell_commands(code: str, console: bool = False) -> list[tuple[int, str]]:
    """(offset, command) of a shell block: continuation lines and here-documents joined,
    comment-only lines dropped; in a ``console`` block only the ``$ `` lines are commands."""
    lines = code.splitlines()
    out, n = [], 0
    while n < len(lines):
        first, line = n, lines[n].strip()
        n += 1
        if console:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        elif line.startswith("$ "):
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        while line.endswith("\\") and n < len(lines):
            line = line[:-1].rstrip() + " " + lines[n].strip()
            n += 1
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if heredoc:
            body = []
            while n < len(lines) and lines[n].strip() != heredoc.group(1):
                body.append(lines[n])
                n += 1
            line = "\n".join([line, *body, heredoc.group(1)])
            n += 1
        out.append((first, line))
    return out


def cli_lines(code: str, console: bool = False) -> list[tuple[int, str]]:
    """(offset, command) of the ``simdb ...`` commands of a shell block."""
    return [(n, c) for n, c in shell_commands(code, console) if c.startswith("simdb ")]


def runs(block: Block) -> bool:
    if block.skip is not None:
        return False
    if block.lang in PY_LANGS | SQL_LANGS:
        return True
    return block.lang in SH_LANGS and bool(cli_lines(block.code, block.lang == "console"))


# ---------------------------------------------------------------- output comparison


def matches(expected: str, actual: str) -> bool:
    """Equal after trimming trailing spaces, where ``...`` in ``expected`` matches any text."""
    exp = "\n".join(x.rstrip() for x in expected.strip().splitlines())
    act = "\n".join(x.rstrip() for x in actual.strip().splitlines())
    parts = exp.split("...")
    if len(parts) == 1:
        return exp == act
    if not act.startswith(parts[0]) or not act.endswith(parts[-1]):
        return False
    pos, end = len(parts[0]), len(act) - len(parts[-1])
    for piece in parts[1:-1]:
        found = act.find(piece, pos, end)
        if found < 0:
            return False
        pos = found + len(piece)
    return pos <= end


def check(block: Block, offset: int, expected: str, actual: str, what: str) -> None:
    block.checks += 1
    if not matches(expected, actual):
        raise AssertionError(
            f"{block.path.name}:{block.line + 1 + offset}: {what} differs from the docs\n"
            f"--- the docs say:\n{expected.strip()}\n--- it gives:\n{actual.strip()}"
        )


# ---------------------------------------------------------------- python


def arrow_comments(code: str) -> dict[int, list[str]]:
    """1-based line -> the ``# -> ...`` texts on it (real comments only, not inside strings)."""
    found: dict[int, list[str]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT and tok.string.startswith("# ->"):
            found.setdefault(tok.start[0], []).append(tok.string[4:].strip())
    return found


def _is_print(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "print")


def run_python(block: Block, ns: dict) -> None:
    tree = ast.parse(block.code, filename=block.where)
    arrows = arrow_comments(block.code)
    lines = block.code.splitlines()
    all_out = io.StringIO()
    ends = [n.lineno for n in tree.body[1:]] + [len(block.code.splitlines()) + 1]
    for node, next_start in zip(tree.body, ends):
        # a statement's `# ->` comments: on its own lines or on comment lines before the next statement
        expected = [t for n in range(node.lineno, max(next_start, node.end_lineno + 1)) for t in arrows.get(n, [])]
        is_value = isinstance(node, ast.Expr) and not _is_print(node)
        # compile the statement's own source (compiling AST objects trips a CPython 3.11 bug, gh-106905)
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        source = "\n" * (first - 1) + "\n".join(lines[first - 1 : node.end_lineno])
        code = compile(source.strip() if is_value else source, block.where, "eval" if is_value else "exec")
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                value = eval(code, ns) if is_value else exec(code, ns)  # noqa: S102 (running examples is the point)
        except Exception as exc:
            if expected and expected[0].startswith("raises "):
                check(block, node.lineno - 1, expected[0][len("raises "):], f"{type(exc).__name__}: {exc}",
                      "the error")
                continue
            raise AssertionError(f"{block.path.name}:{block.line + node.lineno}: the example raised "
                                 f"{type(exc).__name__}: {exc}") from exc
        all_out.write(out.getvalue())
        if not expected:
            continue
        if expected[0].startswith("raises "):
            raise AssertionError(f"{block.path.name}:{block.line + node.lineno}: the docs say it raises, it did not")
        actual = repr(value) if is_value and not out.getvalue() else out.getvalue()
        check(block, node.lineno - 1, "\n".join(expected), actual, "the output")
    if block.expected is not None:
        check(block, 0, block.expected, all_out.getvalue(), "the printed output")


# ---------------------------------------------------------------- sql


def sql_statements(code: str) -> list[tuple[int, str]]:
    """(offset of first line, statement) split at ``;`` ending a line; ``-- ->`` lines after it are its rows."""
    out, buf, first = [], [], None
    for n, line in enumerate(code.splitlines()):
        if out and first is None and re.match(r"\s*--\s*->", line):  # an expected row of the statement before
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
            continue
        if first is None and line.strip() and not line.strip().startswith("--"):
            first = n
        buf.append(line)
        if re.search(r";\s*(--.*)?$", line):
            if first is not None:
                out.append((first, "\n".join(buf)))
            buf, first = [], None
    if first is not None and "\n".join(buf).strip():
        out.append((first, "\n".join(buf)))
    return out


def run_sql(block: Block, url: str) -> None:
    import psycopg

    shown = []
    with psycopg.connect(url, autocommit=True) as conn:
        for offset, stmt in sql_statements(block.code):
            expected = [m.group(1).strip() for m in re.finditer(r"--\s*->(.*)$", stmt, re.MULTILINE)]
            try:
                cur = conn.execute(stmt)
            except psycopg.Error as exc:
                raise AssertionError(f"{block.path.name}:{block.line + 1 + offset}: the SQL failed: {exc}") from exc
            rows = cur.fetchall() if cur.description else []
            text = "\n".join(" | ".join("NULL" if v is None else str(v) for v in row) for row in rows)
            shown.append(text)
            if expected:
                check(block, offset, "\n".join(expected), text, "the result")
    if block.expected is not None:
        check(block, 0, block.expected, "\n".join(t for t in shown if t), "the result")


# ---------------------------------------------------------------- cli


_SHELL_PRELUDE = r"""
set -o pipefail
simdb() { "$__PY" -m simdb.cli "$@"; }
__simdb() {  # N WANT: run the simdb command on stdin, keep its output and status, stop on a wrong status
  local c; c=$(cat)
  eval "$c" > "$__D/out.$1" 2> "$__D/err.$1" < /dev/null
  local rc=$?; echo "$rc" > "$__D/rc.$1"
  [ "$rc" = "$2" ] || exit 97
}
__other() {  # N: run any other command on stdin (making files, cd, cat), which must succeed
  local c; c=$(cat)
  eval "$c" > /dev/null < /dev/null || { echo "$1" > "$__D/failed"; exit 98; }
}
"""


def run_cli(block: Block, env: dict, cwd: Path) -> None:
    """The block runs as one bash script (so ``cd`` and files carry over), each ``simdb``
    command checked on its own: exit status (0 unless it says ``# exit N``) and output;
    the block's other commands (making input files, ``cat``-ing results) must succeed."""
    cmds = shell_commands(block.code, block.lang == "console")
    state = cwd / f".shell-{block.line}"
    state.mkdir()
    script = [_SHELL_PRELUDE]
    for i, (_, cmd) in enumerate(cmds):
        want = re.search(r"#.*\bexit (\d+)\b", cmd)
        call = f"__simdb {i} {want.group(1) if want else 0}" if cmd.startswith("simdb ") else f"__other {i}"
        script.append(f"{call} <<'__SIMDB_DOCS_CMD__'\n{cmd}\n__SIMDB_DOCS_CMD__\n")
    proc = subprocess.run(["bash", "-c", "".join(script)], check=False, cwd=cwd, env={**env, "__PY": sys.executable,
                          "__D": str(state)}, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
    all_out = []
    for i, (offset, cmd) in enumerate(cmds):
        where = f"{block.path.name}:{block.line + 1 + offset}"
        if not cmd.startswith("simdb "):
            if (state / "failed").exists() and (state / "failed").read_text().strip() == str(i):
                raise AssertionError(f"{where}: `{cmd}` failed\n{proc.stderr[-2000:]}")
            continue
        if not (state / f"rc.{i}").exists():
            break
        rc = int((state / f"rc.{i}").read_text())
        want = re.search(r"#.*\bexit (\d+)\b", cmd)
        if rc != (int(want.group(1)) if want else 0):
            err = (state / f"err.{i}").read_text()
            raise AssertionError(f"{where}: `{cmd}` exited {rc}, not {want.group(1) if want else 0}\n{err[-2000:]}")
        out = (state / f"out.{i}").read_text()
        all_out.append(out)
        arrow = re.search(r"#\s*->\s*(.*)$", cmd)
        if arrow:
            check(block, offset, arrow.group(1), out, "the output")
    if proc.returncode != 0:
        raise AssertionError(f"{block.where}: the block failed (status {proc.returncode})\n{proc.stderr[-2000:]}")
    if block.expected is not None:
        check(block, 0, block.expected, "".join(all_out), "the output")


# ---------------------------------------------------------------- a file, top to bottom


def close_all(ns: dict) -> None:
    """Close what the examples opened, so a file's connections do not outlive it."""
    from sqlalchemy.engine import Engine
    from sqlalchemy.orm import Session

    from simdb.index import SimhashIndex

    for value in list(ns.values()):
        with contextlib.suppress(Exception):
            if isinstance(value, SimhashIndex):
                value.close()
            elif isinstance(value, Engine):
                value.dispose()
            elif isinstance(value, Session):
                value.close()
    for value in list(ns.values()):  # Flask-SQLAlchemy and the like keep engines of their own
        with contextlib.suppress(Exception):
            for engine in getattr(value, "_app_engines", {}).values():
                for e in engine.values():
                    e.dispose()


def run_file(path: Path, url: str | None, workdir: Path, monkeypatch, text: str | None = None) -> list[Block]:
    """Run every runnable block of one Markdown file in order; returns the blocks that ran.

    ``url`` None: no database configured, as a reader runs the page: simdb's embedded server, in a home
    of the run's own (its SQL blocks run there too)."""
    workdir.mkdir(parents=True, exist_ok=True)
    if not (workdir / "examples").exists():
        (workdir / "examples").symlink_to(REPO / "examples")
    monkeypatch.setenv("SIMDB_HOME", str(workdir / ".simdb-home"))
    monkeypatch.chdir(workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDB_") and k != "DATABASE_URL"}
    env.update(SIMDB_HOME=str(workdir / ".simdb-home"))
    if url is None:
        monkeypatch.delenv("SIMDB_DATABASE_URL", raising=False)
        monkeypatch.delenv("DATABASE_URL", raising=False)
        plain = ""  # resolved only if the page has SQL: starting the embedded server is the page's to do
    else:
        monkeypatch.setenv("SIMDB_DATABASE_URL", url)
        env.update(SIMDB_DATABASE_URL=url)
        plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
    module = types.ModuleType("simdb_docs_example")  # a real module: classes defined in examples need one
    sys.modules[module.__name__] = module
    ns = module.__dict__
    ran, files = [], []
    try:
        for block in parse_blocks(path, text):
            if not runs(block):
                continue
            if block.lang in PY_LANGS:
                named = re.match(r"# (\w+)\.py\n", block.code)
                if named and named[1] not in sys.modules:
                    sys.modules[named[1]] = module
                    files.append(named[1])
                run_python(block, ns)
            elif block.lang in SQL_LANGS:
                plain = plain or embedded_url().replace("postgresql+psycopg://", "postgresql://", 1)
                run_sql(block, plain)
            else:
                run_cli(block, env, workdir)
            ran.append(block)
    finally:
        close_all(ns)
        for name in [module.__name__, *files]:
            sys.modules.pop(name, None)
        ns.clear()
        # Finalise what the examples left open now, not at a random later allocation: a socket's
        # finaliser running inside the next ast.parse corrupts CPython 3.11's AST recursion counter.
        gc.collect()
    return ran


@pytest.fixture(scope="module")
def docs_database(create_database, server_url):
    """A fresh, migrated database per Markdown file (examples use plain names like "posts"):
    copies of one migrated template, which is several times faster than migrating each."""
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from simdb.store.migrate import migrate

    template = create_database("simdb_docs_tmpl_")
    migrate(template)
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)

    def make():
        name = "simdb_docs_" + uuid.uuid4().hex[:12]
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{make_url(template).database}"'))
        return make_url(server_url).set(database=name).render_as_string(hide_password=False)

    yield make
    admin.dispose()


def files_with_examples() -> list[Path]:
    return [p for p in doc_files() if any(runs(b) for b in parse_blocks(p))]


@pytest.mark.parametrize("path", files_with_examples(), ids=lambda p: str(p.relative_to(REPO)))
def test_examples_run(path, docs_database, tmp_path, monkeypatch):
    for m in REQUIRES_RE.finditer(path.read_text(encoding="utf-8")):
        for module in m.group(1).split():
            pytest.importorskip(module)
    ran = run_file(path, docs_database(), tmp_path / "work", monkeypatch)
    assert ran, f"{path.name}: no example ran"


#: pages whose examples store fixed texts and then check answers: run twice on one database, as a user
#: runs a page again on the embedded server (its data persists), they must give the same output
#: (report.md is left out for time: ~18 s twice; its writes replace their keys)
RERUN_PAGES = ["README.md", "docs/python-api.md", "docs/near-duplicates.md", "docs/flask.md", "docs/fastapi.md",
               "docs/async.md"]


#: the framework and integration pages: each runs as a reader runs it, with no database configured
EMBEDDED_PAGES = ["docs/integrations.md", "docs/verified-models.md", "docs/flask.md", "docs/fastapi.md", "docs/async.md"]


@pytest.mark.parametrize("name", EMBEDDED_PAGES)
def test_examples_run_on_the_embedded_default(name, tmp_path, monkeypatch):
    """No $SIMDB_DATABASE_URL: every example of the page runs on simdb's embedded server, in a home of its own
    (an example that read the variable raised KeyError for a reader who had not set it)."""
    path = REPO / name
    for m in REQUIRES_RE.finditer(path.read_text(encoding="utf-8")):
        for module in m.group(1).split():
            pytest.importorskip(module)
    try:
        assert run_file(path, None, tmp_path / "work", monkeypatch), f"{name}: no example ran"
    finally:
        stop_server(tmp_path / "work" / ".simdb-home" / "pgdata")


@pytest.mark.parametrize("name", RERUN_PAGES)
def test_examples_run_twice(name, docs_database, tmp_path, monkeypatch):
    path = REPO / name
    for m in REQUIRES_RE.finditer(path.read_text(encoding="utf-8")):
        for module in m.group(1).split():
            pytest.importorskip(module)
    url = docs_database()
    run_file(path, url, tmp_path / "first", monkeypatch)
    assert run_file(path, url, tmp_path / "again", monkeypatch), f"{name}: no example ran"


def test_readme_examples_are_checked():
    """The README's Python, SQL and CLI examples run and compare output (none opted out wholesale)."""
    blocks = [b for b in parse_blocks(REPO / "README.md") if runs(b)]
    langs = {("cli" if b.lang in SH_LANGS else "sql" if b.lang in SQL_LANGS else "python") for b in blocks}
    assert langs == {"python", "sql", "cli"}
    py = [b for b in blocks if b.lang in PY_LANGS]
    assert any(arrow_comments(b.code) for b in py), "no README Python example states its output"


def test_a_wrong_example_fails(docs_database, tmp_path, monkeypatch):
    """The old README example claimed distance 2 where the real distance is 10: the runner must catch it."""
    wrong = (
        "```python\n"
        "from simdb import SimhashIndex\n"
        "ix = SimhashIndex(collection='wrong-example')\n"
        "ix.add('post-1', 'The quick brown fox jumps over the lazy dog')\n"
        "print(ix.near('the quick brown fox jumped over the lazy dog', k=3))"
        "  # -> [Match(key='post-1', ..., distance=2, ...)]\n"
        "```\n"
    )
    with pytest.raises(AssertionError, match="differs from the docs"):
        run_file(tmp_path / "wrong.md", docs_database(), tmp_path / "work", monkeypatch, text=wrong)


def test_wrong_sql_and_cli_output_fail(docs_database, tmp_path, monkeypatch):
    url = docs_database()
    sql = "```sql\nSELECT simdb_hamming(0, 7);  -- -> 2\n```\n"
    with pytest.raises(AssertionError, match="differs from the docs"):
        run_file(tmp_path / "w.md", url, tmp_path / "w1", monkeypatch, text=sql)
    cli = "```bash\nsimdb collections --json\n```\n\n```text\n[\"no-such\"]\n```\n"
    with pytest.raises(AssertionError, match="differs from the docs"):
        run_file(tmp_path / "w.md", url, tmp_path / "w2", monkeypatch, text=cli)
    bad = "```bash\nsimdb query -c no-such-collection 'some text'\n```\n"
    with pytest.raises(AssertionError, match="exited 2|exited 3"):
        run_file(tmp_path / "w.md", url, tmp_path / "w3", monkeypatch, text=bad)


def test_parser_rules():
    """Skip markers need a reason and must sit right before a fence; text blocks attach to the block before."""
    md = "<!-- skip-test: needs a cluster -->\n```python\nboom()\n```\n\n```bash\nsimdb stats\n```\n\n```text\nx\n```\n"
    blocks = parse_blocks(REPO / "x.md", md)
    assert [b.skip for b in blocks] == ["needs a cluster", None]
    assert not runs(blocks[0]) and runs(blocks[1]) and blocks[1].expected == "x\n"
    with pytest.raises(AssertionError, match="needs a reason"):
        parse_blocks(REPO / "x.md", "<!-- skip-test: -->\n```python\n1\n```\n")
    with pytest.raises(AssertionError, match="not right before"):
        parse_blocks(REPO / "x.md", "<!-- skip-test: r -->\ntext\n```python\n1\n```\n")
    assert cli_lines("$ simdb add \\\n  --glob '*.txt' x\necho hi\n") == [(0, "simdb add --glob '*.txt' x")]
    assert shell_commands("cat > a.txt <<'EOF'\nsimdb is not run here\nEOF\n# a comment\nsimdb stats\n") == [
        (0, "cat > a.txt <<'EOF'\nsimdb is not run here\nEOF"), (4, "simdb stats")]
    assert cli_lines("$ simdb stats\nsimdb output line\n", console=True) == [(0, "simdb stats")]
    assert matches("[Match(key='a', ...)]", "[Match(key='a', fp=1, distance=0)]")
    assert not matches("[Match(key='a', ..., distance=2, ...)]", "[]")
