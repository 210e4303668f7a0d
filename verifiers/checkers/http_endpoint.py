"""The http protocol: an endpoint scores pairs (`--checker http --model https://checker.internal/score`). Each batch
is one POST of JSON {"premises": [...], "hypotheses": [...]} (two lists of one length: evidence, claim sentences);
the answer is JSON {"scores": [...]}, the scores as verifiers.checkers.external says. A request that cannot
connect, times out (TIMEOUT_S) or is answered 408, 429 or 5xx is retried, ATTEMPTS times in all with a growing
wait; any other answer that is not of that form is a CheckerError naming the endpoint."""

from __future__ import annotations

import http.client
import json
import logging
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import tenacity

from verifiers.checkers.base import CheckerError, ExternalProtocol
from verifiers.checkers.external import DEFAULT_BATCH, UNVERSIONED, ExternalScorer

log = logging.getLogger("citekeeper.nli")

TIMEOUT_S = 60.0  # per request: to connect, and between bytes of the answer
ATTEMPTS = 4  # waits of 0.5, 1 and 2 s between them
RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class _Transient(Exception):
    """A failure worth another attempt: no connection, a timeout, a busy or failing server."""


@dataclass
class Endpoint:
    """A pairs-to-scores function that POSTs each batch to `url`."""

    url: str
    timeout_s: float = TIMEOUT_S
    attempts: int = ATTEMPTS

    @property
    def name(self) -> str:
        return f"http checker {self.url!r}"

    def __call__(self, premises: list[str], hypotheses: list[str]) -> Any:
        body = json.dumps({"premises": premises, "hypotheses": hypotheses}).encode("utf-8")
        answer = self._post_retried(body)
        try:
            payload = json.loads(answer)
        except ValueError as exc:
            raise CheckerError(f"{self.name}: the answer is not JSON: {_excerpt(answer)}") from exc
        if not isinstance(payload, dict) or not isinstance(payload.get("scores"), list):
            raise CheckerError(f'{self.name}: the answer has no "scores" list: {_excerpt(answer)}')
        return payload["scores"]

    def _post_retried(self, body: bytes) -> bytes:
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.attempts),
            wait=tenacity.wait_exponential(multiplier=0.5, max=8),
            retry=tenacity.retry_if_exception_type(_Transient),
            before_sleep=lambda state: log.warning(
                f"event=checker_retry endpoint={self.url!r} attempt={state.attempt_number} "
                f"error={str(state.outcome.exception() if state.outcome else None)!r}"
            ),
            reraise=True,
        )
        try:
            return retrying(self._post, body)
        except _Transient as exc:
            raise CheckerError(f"{self.name}: no answer after {self.attempts} attempts: {exc}") from exc

    def _post(self, body: bytes) -> bytes:
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as error:
            status = f"HTTP {error.code} {error.reason}: {_excerpt(error.read())}"
            if error.code in RETRIED_STATUSES:
                raise _Transient(status) from error
            raise CheckerError(f"{self.name}: {status}") from error
        except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as error:
            raise _Transient(str(getattr(error, "reason", None) or error) or type(error).__name__) from error


def _excerpt(text: bytes) -> str:
    return repr(text[:200].decode("utf-8", "replace"))


def load(spec: str, version: str | None, batch_size: int | None) -> ExternalScorer:
    """The scorer of the endpoint at `spec`; CheckerError when it is no http(s) URL."""
    url = spec.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CheckerError(f"http checker {spec!r}: not an http(s) URL, e.g. https://checker.internal/score")
    return ExternalScorer(
        model_id=url,
        revision=version or UNVERSIONED,
        backend="http",
        checker=PROTOCOL.name,
        where=f"endpoint: {url}",
        score_pairs=Endpoint(url),
        batch_size=batch_size or DEFAULT_BATCH,
    )


PROTOCOL = ExternalProtocol(name="http", load=load)
