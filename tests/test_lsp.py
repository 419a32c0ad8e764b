"""``shapecheck --lsp`` end to end: a scripted client speaks JSON-RPC over stdio to the real
server process, opens a document, reads the diagnostics, asks for the fix, applies a change."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BAD_VIEW, ROOT

pytest.importorskip("pygls")


class Client:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.next_id = 0

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

    def receive(self, timeout: float = 60) -> dict[str, Any]:
        stream = self.process.stdout
        assert stream is not None
        ready, _, _ = select.select([stream], [], [], timeout)
        assert ready, "the server said nothing"
        length = 0
        while (line := stream.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        message: dict[str, Any] = json.loads(stream.read(length))
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


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    process = subprocess.Popen(
        [sys.executable, "-m", "shapecheck", "--lsp"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lsp = Client(process)
    identity = lsp.send(
        "initialize",
        {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}},
        request=True,
    )
    capabilities = lsp.wait_for(identity=identity)["capabilities"]
    assert capabilities["codeActionProvider"]
    lsp.send("initialized", {}, request=False)
    yield lsp
    lsp.wait_for(identity=lsp.send("shutdown", {}, request=True))
    lsp.send("exit", {}, request=False)
    assert process.wait(timeout=30) == 0


def test_diagnostics_fixes_and_changes(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "model.py").as_uri()
    document = {"uri": uri, "languageId": "python", "version": 1, "text": BAD_VIEW}
    client.send("textDocument/didOpen", {"textDocument": document}, request=False)
    published = client.wait_for(method="textDocument/publishDiagnostics")
    assert published["uri"] == uri
    [diagnostic] = published["diagnostics"]
    assert diagnostic["code"] == "SC101" and diagnostic["source"] == "shapecheck"
    assert diagnostic["severity"] == 1  # error
    assert diagnostic["range"]["start"] == {"line": 5, "character": 36}
    assert diagnostic["message"].startswith("`.view()` merges axes")

    actions = client.wait_for(
        identity=client.send(
            "textDocument/codeAction",
            {
                "textDocument": {"uri": uri},
                "range": diagnostic["range"],
                "context": {"diagnostics": [diagnostic]},
            },
            request=True,
        )
    )
    [action] = actions
    assert action["kind"] == "quickfix" and action["isPreferred"] is True
    [edit] = action["edit"]["changes"][uri]
    assert edit["newText"].endswith(".contiguous().view")

    fixed = BAD_VIEW.replace(".transpose(1, 2).view(", ".transpose(1, 2).contiguous().view(")
    client.send(
        "textDocument/didChange",
        {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]},
        request=False,
    )
    assert client.wait_for(method="textDocument/publishDiagnostics")["diagnostics"] == []


def test_a_document_that_does_not_parse_gets_one_diagnostic(client: Client, tmp_path: Path) -> None:
    uri = (tmp_path / "broken.py").as_uri()
    document = {"uri": uri, "languageId": "python", "version": 1, "text": "def f(:\n"}
    client.send("textDocument/didOpen", {"textDocument": document}, request=False)
    [diagnostic] = client.wait_for(method="textDocument/publishDiagnostics")["diagnostics"]
    assert diagnostic["code"] == "SC000" and "syntax error" in diagnostic["message"]
