"""A Hugging Face hub on loopback, serving model directories over the HTTP API huggingface_hub downloads with,
and a loopback address that never answers (a network that drops packets).

Endpoints: model info `/api/models/{repo}[/revision/{rev}]` (sha + siblings), the file tree
`/api/models/{repo}/tree/{rev}`, and files `/{repo}/resolve/{rev}/{file}` (HEAD and GET, with the X-Repo-Commit
and ETag headers huggingface_hub keys its cache on). Every request path is recorded in `requests`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.loopback import serving

REPO_ROOT = Path(__file__).resolve().parent.parent
_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
_TREE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


class LoopbackHub:
    """Serves {repo_id: directory}; each repo's commit is a hash of its files."""

    def __init__(self, repos: dict[str, Path]):
        self.repos = {repo: Path(directory) for repo, directory in repos.items()}
        self.commits = {repo: _commit_of(directory) for repo, directory in self.repos.items()}
        self.requests: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def files(self, repo: str) -> list[str]:
        root = self.repos[repo]
        return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())

    def downloaded(self) -> set[str]:
        """The files fetched with GET so far, as `repo/file`."""
        return {
            m["repo"] + "/" + m["file"] for p in self.requests if p.startswith("GET ") and (m := _RESOLVE.match(p[4:]))
        }

    @contextmanager
    def running(self):
        with serving(self._server):
            yield self

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def do_HEAD(self):
                self._answer(body=False)

            def do_GET(self):
                self._answer(body=True)

            def _answer(self, body: bool):
                path = unquote(urlsplit(self.path).path)
                hub.requests.append(f"{self.command} {path}")
                status, headers, content = hub._route(path)
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(content))}.items():
                    self.send_header(name, value)
                self.end_headers()
                if body:
                    self.wfile.write(content)

            def log_message(self, *args):
                pass

        return Handler

    def _route(self, path: str) -> tuple[int, dict, bytes]:
        for pattern, answer in ((_TREE, self._tree), (_INFO, self._info), (_RESOLVE, self._file)):
            match = pattern.match(path)
            if match and match["repo"] in self.repos:
                return answer(**match.groupdict())
        return 404, {"X-Error-Code": "RepoNotFound", "Content-Type": "application/json"}, b'{"error": "not found"}'

    def _info(self, repo: str, rev: str | None = None):
        siblings = [{"rfilename": name} for name in self.files(repo)]
        return _json({"id": repo, "modelId": repo, "sha": self.commits[repo], "private": False, "siblings": siblings})

    def _tree(self, repo: str, rev: str):
        root = self.repos[repo]
        entries = [
            {"type": "file", "path": name, "size": (root / name).stat().st_size, "oid": _sha1(root / name)}
            for name in self.files(repo)
        ]
        return _json(entries)

    def _file(self, repo: str, rev: str, file: str):
        path = self.repos[repo] / file
        if not path.is_file():
            return 404, {"X-Error-Code": "EntryNotFound"}, b""
        headers = {
            "X-Repo-Commit": self.commits[repo],
            "ETag": f'"{_sha1(path)}"',
            "Content-Type": "application/octet-stream",
        }
        return 200, headers, path.read_bytes()


def _json(value) -> tuple[int, dict, bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps(value).encode()


def _sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def _commit_of(directory: Path) -> str:
    digest = hashlib.sha1()
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(directory)).encode() + path.read_bytes())
    return digest.hexdigest()


@contextmanager
def unanswered_endpoint():
    """An http:// address on loopback whose connections hang, like a network that drops packets: the listening
    socket's accept queue is full, so the kernel ignores further connection attempts."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    filler = socket.create_connection(listener.getsockname())
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        filler.close()
        listener.close()


def hub_env(hf_home: Path, endpoint: str, **extra: str) -> dict[str, str]:
    """The environment of a process that uses the hub at `endpoint` with its own cache; online unless `extra`
    says otherwise (the test session itself runs with HF_HUB_OFFLINE=1)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE")}
    return env | {
        "HF_HOME": str(hf_home),
        "HF_ENDPOINT": endpoint,
        "NO_PROXY": "127.0.0.1",
        "no_proxy": "127.0.0.1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        **extra,
    }


def run_python(
    code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`code` with `args` in a fresh interpreter at the repo root (huggingface_hub reads its settings when imported)."""
    command = [sys.executable, "-c", code, *args]
    return subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
