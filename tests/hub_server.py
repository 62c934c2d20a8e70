"""A local HTTP server that answers like the Hugging Face Hub's file endpoints.

Enough of the Hub for ``huggingface_hub.hf_hub_download`` (checked against huggingface_hub 2.4.0,
``file_download.get_hf_file_metadata`` / ``_get_metadata_or_catch_error`` / ``http_get`` and
``utils._http.hf_raise_for_status``):

* ``HEAD`` and ``GET`` on ``/{org}/{name}/resolve/{revision}/{path}``.
  A hit answers 200 with ``X-Repo-Commit`` (the commit sha: without it huggingface_hub refuses the
  endpoint), ``ETag`` (the file's git blob sha1, quoted, as the Hub gives for non-LFS files: it names
  the blob in the cache), ``Content-Length`` (checked against the bytes received) and
  ``Content-Type``; the GET carries the body. No ``X-Xet-Hash`` header, so no Xet download is tried.
* Errors as the Hub gives them, told apart by ``X-Error-Code`` (huggingface_hub reads only that and
  ``X-Error-Message``, and the JSON body ``{"error": ...}`` on GET):
  unknown repo -> 401 ``RepoNotFound`` (what the Hub answers anonymous callers), gated repo ->
  401 ``GatedRepo`` without a token / 403 ``GatedRepo`` with a token that was not granted access,
  unknown revision -> 404 ``RevisionNotFound``, unknown file -> 404 ``EntryNotFound`` (with
  ``X-Repo-Commit``, so huggingface_hub can record the miss under ``.no_exist``).
* Anything else -> 404 without an error code.

The server runs in a daemon thread on 127.0.0.1 (a free port picked by the OS) and logs every
request as ``(method, path, status)`` in :attr:`FakeHub.log`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["FakeHub", "FakeRepo", "git_blob_sha1", "repo_files_from_folder"]


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob: what the Hub sends as ETag for files not stored with LFS."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def repo_files_from_folder(folder: Path, *, exclude: tuple[str, ...] = ("card.yaml", "PROVENANCE.json")) -> dict[str, bytes]:
    """All files under ``folder`` keyed by their repo path (``transformer/config.json``)."""
    files = {}
    for path in sorted(Path(folder).rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and rel not in exclude and "__pycache__" not in rel and not rel.endswith(".py"):
            files[rel] = path.read_bytes()
    return files


@dataclass
class FakeRepo:
    files: dict[str, bytes]
    commit: str = field(default_factory=lambda: hashlib.sha1(uuid.uuid4().bytes).hexdigest())
    refs: dict[str, str] = field(default_factory=dict)  # branch/tag -> commit; "main" is added
    gated: bool = False
    granted_tokens: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.refs.setdefault("main", self.commit)

    def commit_for(self, revision: str) -> str | None:
        if revision == self.commit:
            return self.commit
        return self.refs.get(revision)


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeHub/1.0"
    protocol_version = "HTTP/1.1"
    timeout = 10  # seconds a connection may sit idle: bounds every read loop

    hub: "FakeHub"  # set on the subclass made per server

    def log_message(self, format, *args):  # noqa: A002 - silence the default stderr log
        pass

    def do_HEAD(self):
        self._answer(head=True)

    def do_GET(self):
        self._answer(head=False)

    def _send(self, status: int, headers: dict[str, str], body: bytes, head: bool) -> None:
        self.send_response(status)
        headers = {"X-Request-Id": uuid.uuid4().hex, **headers, "Content-Length": str(len(body))}
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self.hub._record(self.command, self.path, status)

    def _error(self, status: int, code: str | None, message: str, head: bool, extra: dict[str, str] | None = None):
        headers = {"Content-Type": "application/json; charset=utf-8", **(extra or {})}
        if code is not None:
            headers["X-Error-Code"] = code
        headers["X-Error-Message"] = message
        self._send(status, headers, json.dumps({"error": message}).encode(), head)

    def _answer(self, head: bool) -> None:
        # /{org}/{name}/resolve/{revision}/{file...}; hf_hub_url quotes the revision with safe="" (so a
        # "refs/pr/1" stays one segment) and the file path with safe="/": split first, then unquote.
        raw_parts = urlsplit(self.path).path.lstrip("/").split("/")
        if len(raw_parts) < 5 or raw_parts[2] != "resolve":
            self._error(404, None, "Not Found", head)
            return
        repo_id = f"{unquote(raw_parts[0])}/{unquote(raw_parts[1])}"
        revision = unquote(raw_parts[3])
        filename = "/".join(unquote(p) for p in raw_parts[4:])
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(401, "RepoNotFound", "Repository not found", head)
            return
        if repo.gated:
            auth = self.headers.get("Authorization", "")
            token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
            if token is None:
                self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it and be "
                    "authenticated to access it. Please log in.",
                    head,
                )
                return
            if token not in repo.granted_tokens:
                self._error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the authorized list. "
                    f"Visit https://huggingface.co/{repo_id} to ask for access.",
                    head,
                )
                return
        commit = repo.commit_for(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}", head)
            return
        data = repo.files.get(filename)
        if data is None:
            self._error(404, "EntryNotFound", f"{filename} does not exist on \"{revision}\"", head,
                        {"X-Repo-Commit": commit})
            return
        headers = {
            "Content-Type": "application/json; charset=utf-8" if filename.endswith(".json") else "text/plain",
            "ETag": f'"{git_blob_sha1(data)}"',
            "X-Repo-Commit": commit,
            "Accept-Ranges": "bytes",
            "Cache-Control": "no-cache",
        }
        self._send(200, headers, data, head)


class FakeHub:
    """``with FakeHub() as hub: hub.add_repo("org/name", files); hub.endpoint`` -> http://127.0.0.1:PORT"""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.log: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    def add_repo(self, repo_id: str, files: dict[str, bytes], **kwargs) -> FakeRepo:
        repo = FakeRepo(files=dict(files), **kwargs)
        self.repos[repo_id] = repo
        return repo

    def _record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.log.append((method, path, status))

    def requests(self) -> list[tuple[str, str, int]]:
        with self._lock:
            return list(self.log)

    @property
    def port(self) -> int:
        """The port it listens on (after stop(): the port it listened on, now refusing connections)."""
        assert self._port is not None, "server never started"
        return self._port

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeHub":
        handler = type("Handler", (_Handler,), {"hub": self})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self._port = server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> "FakeHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
