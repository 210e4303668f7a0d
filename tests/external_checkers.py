"""Checkers that are not transformers models, for tests: Python callables (`tests.external_checkers:score_pairs`
and two that break the contract) and an HTTP endpoint on loopback that scores pairs with the same function.

Endpoint paths: `/score` answers as the contract says; `/flaky` answers 503 to its first request, then as
`/score`; `/slow` waits a second first; `/not-json`, `/no-scores`, `/short` (one score fewer than pairs) and
`/missing` (404) answer out of contract. Each request is recorded as (path, number of pairs)."""

from __future__ import annotations

import json
import re
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.loopback import serving


def score_pairs(premises: list[str], hypotheses: list[str]) -> list[list[float]]:
    """(entailment, neutral, contradiction): a claim saying "never" is contradicted (0.05, 0.15, 0.8); any other is
    entailed by the share of its words the evidence holds (rounded to 1/1000), neutral by the rest."""
    rows = []
    for premise, hypothesis in zip(premises, hypotheses):
        words = set(re.findall(r"\w+", hypothesis.lower()))
        if "never" in words:
            rows.append([0.05, 0.15, 0.8])
            continue
        share = round(len(words & set(re.findall(r"\w+", premise.lower()))) / max(1, len(words)), 3)
        rows.append([share, round(1.0 - share, 3), 0.0])
    return rows


def support_only(premises: list[str], hypotheses: list[str]) -> list[float]:
    """The one-score form: score_pairs' entailment alone."""
    return [row[0] for row in score_pairs(premises, hypotheses)]


def one_score_short(premises: list[str], hypotheses: list[str]) -> list[float]:
    return support_only(premises, hypotheses)[1:]


NOT_CALLABLE = 42


class ScoringEndpoint:
    """The endpoint, on 127.0.0.1 at a free port; `url` is its root."""

    def __init__(self):
        self.requests: list[tuple[str, int]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @contextmanager
    def running(self):
        with serving(self._server):
            yield self

    def pairs_sent(self, path: str = "/score") -> list[int]:
        return [n for p, n in self.requests if p == path]

    def _handler(self):
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                premises, hypotheses = body["premises"], body["hypotheses"]
                endpoint.requests.append((self.path, len(premises)))
                scores = score_pairs(premises, hypotheses)
                if self.path == "/flaky" and len(endpoint.pairs_sent("/flaky")) == 1:
                    return self._answer(503, b"busy")
                if self.path == "/slow":
                    time.sleep(1.0)
                answers = {
                    "/not-json": b"<html>a proxy's error page</html>",
                    "/no-scores": json.dumps({"verdicts": scores}).encode(),
                    "/short": json.dumps({"scores": scores[1:]}).encode(),
                }
                if self.path in answers:
                    return self._answer(200, answers[self.path])
                if self.path not in ("/score", "/flaky", "/slow"):
                    return self._answer(404, b"no such endpoint")
                return self._answer(200, json.dumps({"scores": scores}).encode())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet
                pass

        return Handler
