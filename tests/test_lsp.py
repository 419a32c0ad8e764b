"""``shapecheck --lsp`` end to end: a scripted client speaks JSON-RPC over stdio to the real
server process, opens a document, reads the diagnostics, asks for the fix, applies a change,
hovers over a tensor and asks for inlay hints.

Some tests run an instrumented server (``INSTRUMENTED``): a document holding ``# CRASH``
makes the analysis raise, and one holding ``# HOLD`` makes its check log "holding" and wait
for a ``test/release`` notification, so a test can act while a check is under way."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BAD_VIEW, ROOT, UNSCALED, run_python

pytest.importorskip("pygls")

FIXED_VIEW = BAD_VIEW.replace(").view(", ").contiguous().view(")
"""BAD_VIEW with its quick fix applied."""

INSTRUMENTED = """
import threading

from lsprotocol import types

from shapecheck import linter, lsp

released = threading.Event()
analyse = linter.analyse


def instrumented(module, text, **options):
    if "# CRASH" in text:
        raise RuntimeError("injected")
    if "# HOLD" in text:
        lsp.server.window_log_message(types.LogMessageParams(types.MessageType.Log, "holding"))
        released.wait()
    return analyse(module, text, **options)


linter.analyse = instrumented
lsp.server.feature("test/release")(lambda params: released.set())
lsp.serve()
"""

LSP_LINE_END = re.compile(r"\r\n|\r|\n")
"""The only line ends LSP knows (``str.splitlines`` knows more)."""

WHOLE_DOCUMENT = {"start": {"line": 0, "character": 0}, "end": {"line": 99, "character": 0}}


class Client:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.next_id = 0
        self.received: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any], *, request: bool) -> int | None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        identity = None
        if request:
            self.next_id += 1
            identity = message["id"] = self.next_id
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.process.stdin.flush()
        return identity

    def request(self, method: str, params: dict[str, Any]) -> Any:
        return self.wait_for(identity=self.send(method, params, request=True))

    def open(self, uri: str, text: str) -> None:
        document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        self.send("textDocument/didOpen", {"textDocument": document}, request=False)

    def code_actions(self, uri: str, where: dict[str, Any], *diagnostics: Any) -> Any:
        params = {
            "textDocument": {"uri": uri},
            "range": where,
            "context": {"diagnostics": list(diagnostics)},
        }
        return self.request("textDocument/codeAction", params)

    def change(self, uri: str, text: str, version: int) -> None:
        document = {"uri": uri, "version": version}
        params = {"textDocument": document, "contentChanges": [{"text": text}]}
        self.send("textDocument/didChange", params, request=False)

    def receive(self, timeout: float = 60) -> dict[str, Any]:
        stream = self.process.stdout
        assert stream is not None
        # the pipe is read unbuffered: bytes a buffered reader had taken ahead would be a
        # message select cannot see, and the client would wait for it in vain
        ready, _, _ = select.select([stream], [], [], timeout)
        assert ready, "the server said nothing"
        length = 0
        while (line := stream.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        body = b""
        while len(body) < length and (chunk := stream.read(length - len(body))):
            body += chunk  # an unbuffered read may return less than asked
        message: dict[str, Any] = json.loads(body)
        self.received.append(message)
        failed = message.get("method") == "window/showMessage"
        assert not (failed and "Error in server" in message["params"]["message"]), message
        return message

    def wait_for(self, *, method: str | None = None, identity: int | None = None) -> Any:
        """The next message with this method (a notification) or id (a response)."""
        while True:
            message = self.receive()
            if method is not None and message.get("method") == method:
                return message["params"]
            if identity is not None and message.get("id") == identity and "method" not in message:
                assert "error" not in message, message
                return message["result"]

    def shown_messages(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.received if m.get("method") == "window/showMessage"]


@contextmanager
def serving(
    tmp_path: Path, command: list[str], initialization_options: Any = None
) -> Iterator[Client]:
    """A started client and server (given ``initializationOptions`` if not ``None``); the
    server is shut down (unless the test ended it) and must exit with status 0."""
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        bufsize=0,
    )
    try:
        lsp = Client(process)
        params = {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}}
        if initialization_options is not None:
            params["initializationOptions"] = initialization_options
        capabilities = lsp.request("initialize", params)["capabilities"]
        assert capabilities["codeActionProvider"]
        lsp.send("initialized", {}, request=False)
        yield lsp
        if process.poll() is None:
            lsp.request("shutdown", {})
            lsp.send("exit", {}, request=False)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    with serving(tmp_path, [sys.executable, "-m", "shapecheck", "--lsp"]) as lsp:
        yield lsp


@pytest.fixture
def instrumented(tmp_path: Path) -> Iterator[Client]:
    with serving(tmp_path, [sys.executable, "-c", INSTRUMENTED]) as lsp:
        yield lsp


@pytest.fixture
def hinting(tmp_path: Path) -> Iterator[Client]:
    """A server whose client turned the inlay hints on, as the README shows."""
    options = {"settings": {"inlayHints": True}}
    with serving(tmp_path, [sys.executable, "-m", "shapecheck", "--lsp"], options) as lsp:
        yield lsp


def offset(text: str, position: dict[str, int]) -> int:
    """Where an LSP position (a line, then UTF-16 code units into it) falls in ``text``."""
    line_starts = [0, *(end.end() for end in LSP_LINE_END.finditer(text))]
    index = line_starts[position["line"]]
    units = position["character"]
    while units > 0:
        units -= len(text[index].encode("utf-16-le")) // 2
        index += 1
    return index


def apply(text: str, edits: list[dict[str, Any]]) -> str:
    """``text`` with the edits made, as an LSP client makes them."""
    spans = [
        (offset(text, e["range"]["start"]), offset(text, e["range"]["end"]), e["newText"])
        for e in edits
    ]
    for start, end, new_text in sorted(spans, reverse=True):
        text = text[:start] + new_text + text[end:]
    return text


def quick_fix(client: Client, uri: str, text: str) -> tuple[dict[str, Any], str]:
    """Open ``text``: its one diagnostic, and the text its quick fix makes."""
    client.open(uri, text)
    [diagnostic] = client.wait_for(method="textDocument/publishDiagnostics")["diagnostics"]
    [action] = client.code_actions(uri, diagnostic["range"], diagnostic)
    return diagnostic, apply(text, action["edit"]["changes"][uri])


def test_diagnostics_fixes_and_changes(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "model.py").as_uri()
    client.open(uri, BAD_VIEW)
    published = client.wait_for(method="textDocument/publishDiagnostics")
    assert published["uri"] == uri
    [diagnostic] = published["diagnostics"]
    assert diagnostic["code"] == "SC101" and diagnostic["source"] == "shapecheck"
    assert diagnostic["severity"] == 1  # error
    assert diagnostic["range"]["start"] == {"line": 5, "character": 36}
    assert diagnostic["message"].startswith("`.view()` merges axes")

    [action] = client.code_actions(uri, diagnostic["range"], diagnostic)
    assert action["kind"] == "quickfix" and action["isPreferred"] is True
    assert apply(BAD_VIEW, action["edit"]["changes"][uri]) == FIXED_VIEW

    client.change(uri, FIXED_VIEW, version=2)
    assert client.wait_for(method="textDocument/publishDiagnostics")["diagnostics"] == []


def test_a_document_that_does_not_parse_gets_one_diagnostic(client: Client, tmp_path: Path) -> None:
    client.open((tmp_path / "broken.py").as_uri(), "def f(:\n")
    [diagnostic] = client.wait_for(method="textDocument/publishDiagnostics")["diagnostics"]
    assert diagnostic["code"] == "SC000" and "syntax error" in diagnostic["message"]


@pytest.mark.parametrize(("encoding", "literal"), [("latin-1", "'é'"), ("cp1252", "'ééé'")])
def test_d19a_a_coding_declaration_leaves_positions_and_fixes_right(
    client: Client, tmp_path: Path, encoding: str, literal: str
) -> None:
    cookie = f"# -*- coding: {encoding} -*-\n"
    text = cookie + BAD_VIEW.replace("return ", f"return {literal}, ")
    diagnostic, fixed = quick_fix(client, (tmp_path / "model.py").as_uri(), text)
    assert offset(text, diagnostic["range"]["start"]) == text.index("view(")
    assert fixed == cookie + FIXED_VIEW.replace("return ", f"return {literal}, ")


@pytest.mark.parametrize(
    "separator", ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"], ids=ascii
)
def test_d19b_characters_that_end_no_line_for_lsp_leave_fixes_right(
    client: Client, tmp_path: Path, separator: str
) -> None:
    """``str.splitlines`` breaks at these; LSP and Python do not. An emoji before the fix
    (two UTF-16 units) checks the columns too."""

    def variant(source: str) -> str:
        source = source.replace("return ", "return '😀', ")
        return source.replace("import torch\n", f"import torch\n# page{separator}break\n")

    text = variant(BAD_VIEW)
    diagnostic, fixed = quick_fix(client, (tmp_path / "model.py").as_uri(), text)
    assert offset(text, diagnostic["range"]["start"]) == text.index("view(")
    assert fixed == variant(FIXED_VIEW)


def test_d19c_an_internal_error_replaces_the_diagnostics(
    instrumented: Client, tmp_path: Path
) -> None:
    uri = (tmp_path / "model.py").as_uri()
    instrumented.open(uri, BAD_VIEW)
    [found] = instrumented.wait_for(method="textDocument/publishDiagnostics")["diagnostics"]
    assert found["code"] == "SC101"
    instrumented.change(uri, BAD_VIEW + "# CRASH\n", version=2)
    published = instrumented.wait_for(method="textDocument/publishDiagnostics")
    assert published["version"] == 2
    [diagnostic] = published["diagnostics"]
    assert diagnostic["code"] == "SC000" and "internal error" in diagnostic["message"]
    assert diagnostic["range"]["start"] == {"line": 0, "character": 0}


def test_d19c_a_lone_surrogate_replaces_the_diagnostics(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "model.py").as_uri()
    client.open(uri, BAD_VIEW)
    [found] = client.wait_for(method="textDocument/publishDiagnostics")["diagnostics"]
    assert found["code"] == "SC101"
    client.change(uri, BAD_VIEW + 'text = "\ud800"\n', version=2)
    published = client.wait_for(method="textDocument/publishDiagnostics")
    assert published["version"] == 2
    [diagnostic] = published["diagnostics"]
    assert diagnostic["code"] == "SC000" and "cannot encode" in diagnostic["message"]
    assert diagnostic["range"]["start"] == {"line": 6, "character": 8}


@pytest.mark.parametrize(
    "configuration",
    [b"[tool.shapecheck]\nselect = ['SC1']  # \xff\n", b"[tool.shapecheck]\nno-such-key = 1\n"],
    ids=["invalid UTF-8", "unknown key"],
)
def test_d19d_a_broken_configuration_is_shown_once_and_the_defaults_apply(
    client: Client, tmp_path: Path, configuration: bytes
) -> None:
    (tmp_path / "pyproject.toml").write_bytes(configuration)
    for name in ("first.py", "second.py"):
        client.open((tmp_path / name).as_uri(), BAD_VIEW)
        published = client.wait_for(method="textDocument/publishDiagnostics")
        assert [d["code"] for d in published["diagnostics"]] == ["SC101"]
    [shown] = client.shown_messages()
    assert shown["type"] == 1  # error
    assert "pyproject.toml" in shown["message"] and "default settings" in shown["message"]


def test_d19e_an_unopened_document_is_not_read_nor_changed(client: Client, tmp_path: Path) -> None:
    never_opened = (tmp_path / "absent.py").as_uri()
    assert client.code_actions(never_opened, WHOLE_DOCUMENT) == []
    client.change(never_opened, BAD_VIEW, version=2)
    client.send("textDocument/didSave", {"textDocument": {"uri": never_opened}}, request=False)
    # messages are handled in order: what those caused would come before this document's check
    opened = (tmp_path / "model.py").as_uri()
    client.open(opened, BAD_VIEW)
    assert client.wait_for(method="textDocument/publishDiagnostics")["uri"] == opened
    assert client.shown_messages() == []
    published = [m for m in client.received if m.get("method") == "textDocument/publishDiagnostics"]
    assert [m["params"]["uri"] for m in published] == [opened]


def test_d18_a_running_check_holds_up_neither_requests_nor_shutdown(
    instrumented: Client, tmp_path: Path
) -> None:
    uri = (tmp_path / "model.py").as_uri()
    instrumented.open(uri, BAD_VIEW + "# HOLD\n")
    instrumented.wait_for(method="window/logMessage")
    assert instrumented.code_actions(uri, WHOLE_DOCUMENT) == []  # not checked yet
    instrumented.request("shutdown", {})
    instrumented.send("exit", {}, request=False)
    assert instrumented.process.wait(timeout=30) == 0


def test_d18_the_server_exits_when_its_input_ends_during_a_check(
    instrumented: Client, tmp_path: Path
) -> None:
    instrumented.open((tmp_path / "model.py").as_uri(), BAD_VIEW + "# HOLD\n")
    instrumented.wait_for(method="window/logMessage")
    assert instrumented.process.stdin is not None
    instrumented.process.stdin.close()
    assert instrumented.process.wait(timeout=30) == 0


def test_d18_changes_during_a_check_supersede_it(instrumented: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "model.py").as_uri()
    instrumented.open(uri, BAD_VIEW + "# HOLD\n")
    instrumented.wait_for(method="window/logMessage")
    instrumented.change(uri, BAD_VIEW, version=2)
    instrumented.change(uri, FIXED_VIEW, version=3)
    instrumented.send("test/release", {}, request=False)
    published = instrumented.wait_for(method="textDocument/publishDiagnostics")
    assert (published["version"], published["diagnostics"]) == (3, [])


# --- shapes in the editor, links to the rules, fixing all -----------------------------------

EXAMPLE = (ROOT / "examples" / "attention_mistakes.py").read_text(encoding="utf-8")


def position(text: str, code: str, within: str | None = None) -> dict[str, int]:
    """The LSP position (UTF-16 columns) of ``code``'s first occurrence (after ``within``'s)."""
    index = text.index(code, text.index(within) if within else 0)
    line_start = text.rfind("\n", 0, index) + 1
    units = len(text[line_start:index].encode("utf-16-le")) // 2
    return {"line": text.count("\n", 0, index), "character": units}


def hover(client: Client, uri: str, where: dict[str, int]) -> Any:
    return client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": where})


def inlay_hints(client: Client, uri: str, first: int = 0, last: int = 999) -> Any:
    where = {"start": {"line": first, "character": 0}, "end": {"line": last, "character": 0}}
    return client.request("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": where})


def fix_all(client: Client, uri: str, *only: str) -> Any:
    params = {
        "textDocument": {"uri": uri},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": [], "only": list(only)},
    }
    return client.request("textDocument/codeAction", params)


def test_hover_on_a_tensor_shows_its_shape_role_and_layout(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "attention_mistakes.py").as_uri()
    client.open(uri, EXAMPLE)
    reply = hover(client, uri, position(EXAMPLE, "scores = "))
    assert reply["contents"] == {
        "kind": "markdown",
        "value": "`scores: [batch, self.num_heads, q_len, self.head_dim]` · attention scores, "
        "not scaled"
        "\n\nlayout: contiguous",
    }
    assert offset(EXAMPLE, reply["range"]["start"]) == EXAMPLE.index("scores = ")
    assert offset(EXAMPLE, reply["range"]["end"]) == EXAMPLE.index(" = torch.matmul(q")
    # a name where it is read: the value that reaches it
    used = hover(client, uri, position(EXAMPLE, "q,", within="scores = "))
    assert used["contents"]["value"] == (
        "`q: [batch, self.num_heads, q_len, self.head_dim]`"
        "\n\nlayout: not contiguous (`.transpose(1, 2)`, line 25)"
    )
    returned = hover(client, uri, position(EXAMPLE, "return self.fc_out"))
    assert returned["contents"]["value"].startswith("`return: [batch, q_len, d_model]`")
    assert hover(client, uri, position(EXAMPLE, "import torch")) is None


def test_hover_says_how_scores_were_scaled_and_what_a_mask_means(
    client: Client, tmp_path: Path
) -> None:
    text = (
        "import math\nimport torch\n\n\n"
        "def attend(q, k, seq):\n"
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
        "    keep = torch.tril(torch.ones(seq, seq, dtype=torch.bool))\n"
        "    return scores.masked_fill(~keep, float('-inf')).softmax(dim=-1)\n"
    )
    uri = (tmp_path / "model.py").as_uri()
    client.open(uri, text)
    scores = hover(client, uri, position(text, "scores"))["contents"]["value"]
    assert scores.startswith("`scores: ")
    assert "· attention scores, scaled by 1/sqrt(q.shape[-1])" in scores
    keep = hover(client, uri, position(text, "keep"))["contents"]["value"]
    assert keep == (
        "`keep: [seq, seq]` · boolean mask, True = attend\n\nlayout: contiguous · dtype: bool"
    )


def test_hover_counts_columns_in_utf16_as_the_client_does(client: Client, tmp_path: Path) -> None:
    """The emoji is two UTF-16 units, one character, four UTF-8 bytes (``ast``'s columns)."""
    text = "import torch\n\nx = torch.zeros(2, 3)\nlabel = '😀'; y = x.transpose(0, 1)\n"
    uri = (tmp_path / "model.py").as_uri()
    client.open(uri, text)
    reply = hover(client, uri, position(text, "y ="))
    assert reply["contents"]["value"] == (
        "`y: [3, 2]`\n\nlayout: not contiguous (`.transpose(0, 1)`, line 4) · dtype: float32"
    )
    assert offset(text, reply["range"]["start"]) == text.index("y =")


def test_inlay_hints_are_off_unless_the_client_asks(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "attention_mistakes.py").as_uri()
    client.open(uri, EXAMPLE)
    assert hover(client, uri, position(EXAMPLE, "scores = ")) is not None  # analysed
    assert inlay_hints(client, uri) == []


def test_inlay_hints_show_each_assignments_shape(hinting: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "attention_mistakes.py").as_uri()
    hinting.open(uri, EXAMPLE)
    hints = inlay_hints(hinting, uri)
    # each hint sits right after the name it describes, as a type hint does
    shown = [(EXAMPLE[: offset(EXAMPLE, h["position"])].split()[-1], h["label"]) for h in hints]
    heads = "[batch, self.num_heads, q_len, self.head_dim]"
    unknown = "[batch, self.num_heads, ?, self.head_dim]"
    # what SC201's wrong transpose makes: the last axis is the features, not the keys (the
    # heads broadcast against the keys' unknown length, so they are the heads where it runs)
    swapped = "[batch, self.num_heads, q_len, self.head_dim]"
    assert shown == [
        ("q", f": {heads}"),
        ("k", f": {unknown}"),
        ("v", f": {unknown}"),
        ("scores", f": {swapped}"),
        ("weights", f": {swapped}"),
        ("out", f": {swapped}"),
        ("out", ": [batch, q_len, d_model]"),
    ]
    assert all(h["kind"] == 1 for h in hints)  # a type
    assert hints[3]["tooltip"] == f"scores: {swapped} · attention scores, not scaled"
    scores_line = position(EXAMPLE, "scores = ")["line"]
    only_there = inlay_hints(hinting, uri, scores_line, scores_line)
    assert [h["label"] for h in only_there] == [f": {swapped}"]


def test_an_inlay_hints_setting_that_is_not_a_boolean_is_shown(tmp_path: Path) -> None:
    options = {"settings": {"inlayHints": "yes"}}
    with serving(tmp_path, [sys.executable, "-m", "shapecheck", "--lsp"], options) as lsp:
        uri = (tmp_path / "attention_mistakes.py").as_uri()
        lsp.open(uri, EXAMPLE)
        assert inlay_hints(lsp, uri) == []
        [shown] = lsp.shown_messages()
        assert "inlayHints must be true or false" in shown["message"]


def test_diagnostics_link_to_their_rules_documentation(client: Client, tmp_path: Path) -> None:
    client.open((tmp_path / "model.py").as_uri(), BAD_VIEW)
    [diagnostic] = client.wait_for(method="textDocument/publishDiagnostics")["diagnostics"]
    href = diagnostic["codeDescription"]["href"]
    assert href.startswith("file:///")
    from shapecheck.rule import rule_by_code

    rule = rule_by_code("SC101")
    assert rule is not None
    documented = Path(href.removeprefix("file://")).read_text(encoding="utf-8")
    assert 'code = "SC101"' in documented and rule.documentation().splitlines()[1] in documented
    client.open((tmp_path / "broken.py").as_uri(), "def f(:\n")
    [unreadable] = client.wait_for(method="textDocument/publishDiagnostics")["diagnostics"]
    assert unreadable["code"] == "SC000" and "codeDescription" not in unreadable


def test_fix_all_applies_the_safe_fixes_as_fix_does_and_no_unsafe_one(
    client: Client, tmp_path: Path
) -> None:
    text = BAD_VIEW + "\n\n" + UNSCALED.removeprefix("import torch\n")  # SC101 safe, SC301 not
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    client.open(uri, text)
    [action] = fix_all(client, uri, "source.fixAll")
    assert action["kind"] == "source.fixAll.shapecheck"
    assert action["title"] == "shapecheck: apply 1 safe fix"
    fixed = apply(text, action["edit"]["changes"][uri])
    assert run_python("-m", "shapecheck", "--no-cache", "--fix", "model.py", cwd=tmp_path)
    assert fixed == path.read_text(encoding="utf-8")  # what `shapecheck --fix` wrote
    assert ".contiguous().view(" in fixed and "sqrt" not in fixed
    # asked for by kind only: not among the quick fixes, which do not run the fixer
    assert fix_all(client, uri, "quickfix") == []
    assert [a["kind"] for a in fix_all(client, uri, "source")] == ["source.fixAll.shapecheck"]
    everything = client.code_actions(uri, WHOLE_DOCUMENT)
    assert "source.fixAll.shapecheck" not in [a["kind"] for a in everything]


def test_fix_all_offers_nothing_where_only_unsafe_fixes_remain(
    client: Client, tmp_path: Path
) -> None:
    uri = (tmp_path / "model.py").as_uri()
    client.open(uri, UNSCALED)
    assert fix_all(client, uri, "source.fixAll.shapecheck") == []


# --- the project's other files ------------------------------------------------------------------

SPLIT_HEADS = (
    "import torch\n\n\n"
    "def split_heads(x, heads):\n"
    "    b, l, e = x.shape\n"
    "    return x.view(b, l, heads, e // heads).transpose(1, 2)\n"
)
HEADS_OF = (
    "import torch\n"
    "from .layers import split_heads\n\n\n"
    "def heads_of(x):\n"
    "    b, l, e = x.shape\n"
    "    heads = split_heads(x, 4)\n"
    "    return heads.view(b, l, e)\n"
)
"""A module of a package whose helper, in ``layers.py``, leaves the heads transposed."""


def test_hover_and_hints_see_the_projects_other_files_and_the_editors_text(
    hinting: Client, tmp_path: Path
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "layers.py").write_text(SPLIT_HEADS, encoding="utf-8")
    (tmp_path / "pkg" / "model.py").write_text("", encoding="utf-8")  # the buffer is not saved
    uri = (tmp_path / "pkg" / "model.py").as_uri()
    hinting.open(uri, HEADS_OF)
    [diagnostic] = hinting.wait_for(method="textDocument/publishDiagnostics")["diagnostics"]
    assert diagnostic["code"] == "SC101"
    shown = hover(hinting, uri, position(HEADS_OF, "heads ="))["contents"]["value"]
    assert shown.startswith("`heads: [b, 4, l, e//4]`")
    assert [hint["label"] for hint in inlay_hints(hinting, uri)] == [": [b, 4, l, e//4]"]


def test_an_untitled_document_lies_nowhere(client: Client, tmp_path: Path) -> None:
    """Not in the folder the server runs in: it sees no other file, as unnamed stdin does."""
    (tmp_path / "layers.py").write_text(SPLIT_HEADS, encoding="utf-8")
    uri = "untitled:model.py"
    client.open(uri, HEADS_OF)
    published = client.wait_for(method="textDocument/publishDiagnostics")
    assert (published["uri"], published["diagnostics"]) == (uri, [])
    assert hover(client, uri, position(HEADS_OF, "heads =")) is None  # nothing known of it
