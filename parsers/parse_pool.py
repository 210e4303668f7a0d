"""Parse documents in worker processes, with a real wall-clock limit per document.

Workers come from a forkserver: a fresh interpreter that imports the parsers and unstructured once and
parses one small document (PRELOAD: parsers.warm_worker, ~5 s), then forks a worker per request. Forking it
is safe, as forking the caller (a Dagster run, a test session, maybe holding threads and models) would not
be, and cheap, as spawning would not be: every worker of every ingest would pay those ~5 s again. The server
lives as long as the process that started it, so only the first ingest of a process pays.

Documents go out biggest first, copies of a file together (_parse_groups), in short runs: a run to a worker,
which sends back one outcome per document. The parent re-arms the worker's deadline (parse_timeout_s) at
each document; a worker past it is killed with SIGKILL, which C code inside a parser cannot hold off the way
it holds off a Python signal handler: its document is quarantined as ParseTimeout, the rest of its run goes
to a fresh worker. A worker that dies by itself (a crash, the out-of-memory killer) quarantines its document
the same way, as WorkerDied. The pool gives exactly what a serial parse gives.

A run too small to pay for that start (a nightly reindex of a few changed documents) parses here instead,
serially (_parses_here), unless a document needs a worker's isolation (Format.isolated: OCR, LibreOffice,
pandoc) or the caller is not the main thread, which parse_timeout_s's SIGALRM needs.

`iter_outcomes` hands each outcome on as soon as it is done (the order of completion), so that ingest can
write it away and keep only a batch in memory.
"""

from __future__ import annotations

import importlib
import math
import multiprocessing
import os
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from parsers.document import parse_document
from parsers.formats import BY_FILETYPE
from parsers.records import (
    DocumentError,
    IngestError,
    NothingToCite,
    ParseConfig,
    ParsedDocument,
    SkippedDocument,
    SourceFile,
)

Outcome = ParsedDocument | IngestError | SkippedDocument
Progress = Callable[[str, int, int], None]  # (source_path, documents parsed so far, documents to parse)
Group = list[tuple[int, SourceFile]]  # (index in the sources, source), parsed one after the other

# What the forkserver imports before forking workers: markdown and HTML parsing, warmed up. The PDF, office
# and OCR stacks load in the workers that meet such a file.
PRELOAD = ["parsers.warm_worker"]
# A worker's share of the documents goes out in this many runs: long enough that documents of similar size
# (versions of one file) meet the caches their neighbours filled, short enough to even out the load.
RUNS_PER_WORKER = 8
# Up to this many documents and bytes, a run parses here (_parses_here) rather than start the pool. Measured
# 2026-12-02 on 2 CPUs (load 1.6-1.8) with the lighter parser imports (thinc without torch, no language
# detection): a CLI reindex of 4 changed httpx pages, here/pool wall s, 17.8 KB 4.04/4.18, 35 KB 4.26/5.30,
# 97 KB 5.35/5.84; a page parses at ~16 ms per KB here. With the pool's start ~1 s dearer than the imports, its
# two workers win past ~2 s of parse, ~128 KB. (Before those imports got lighter, under load 4-7: here/pool CPU s
# k=10 notes 10.2/11.4-11.9, k=60 11.1-12.7/12.8-14.9, and the limit was 24 KB.)
IN_PROCESS_MAX_DOCUMENTS = 40
IN_PROCESS_MAX_BYTES = 128 * 1024


def usable_cpus() -> int:
    """CPUs this process may run on: a container's or taskset's share, which os.cpu_count() ignores."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def iter_outcomes(
    sources: list[SourceFile], config: ParseConfig, progress: Progress | None = None
) -> Iterator[tuple[int, Outcome]]:
    """(index in `sources`, outcome) of every source, each as soon as it is done: nothing is kept here, so
    memory stays what one document's outcome costs, however many sources there are.

    config.workers processes parse at once (None: one per usable CPU); 1 parses here, serially, where
    parse_timeout_s is a SIGALRM in the main thread (parsers.time_limit), and so does a small run
    (_parses_here). Closing the iterator early (or an exception in the consumer) stops the pool's workers.
    """
    if config.workers == 1 or not sources or _parses_here(sources):
        return _parse_serially(sources, config, progress)
    workers = config.workers or usable_cpus()
    runs = _runs(_parse_groups(sources), math.ceil(len(sources) / (workers * RUNS_PER_WORKER)))
    return _parse_in_pool(runs, len(sources), config, min(workers, len(runs)), progress)


def _parses_here(sources: list[SourceFile]) -> bool:
    """Whether parsing `sources` here, serially, beats starting the pool (_RunSize.parses_here)."""
    size = _RunSize()
    for source in sources:
        size.add(source)
    return size.parses_here


@dataclass
class _RunSize:
    n_documents: int = 0
    n_bytes: int = 0
    isolated: bool = False

    def add(self, source: SourceFile) -> None:
        self.n_documents += 1
        self.n_bytes += source.size_bytes
        self.isolated = self.isolated or _isolated(source)

    @property
    def parses_here(self) -> bool:
        """Few and small enough, none of a format that needs a worker's isolation, and called from the main
        thread, where parse_timeout_s can interrupt a parse (parsers.time_limit: elsewhere it would run unlimited)."""
        return (
            threading.current_thread() is threading.main_thread()
            and self.n_documents <= IN_PROCESS_MAX_DOCUMENTS
            and self.n_bytes <= IN_PROCESS_MAX_BYTES
            and not self.isolated
        )


class PoolWarmup:
    """Starts the pool's forkserver as soon as the documents discovery has read (new or changed: only those may
    need a parse) are too many to parse here, so that its start (~2 s: a fresh interpreter importing the parsers,
    on another CPU) overlaps the rest of discovery and the reuse check instead of following them. A document
    read but unchanged after all costs that start for nothing; a run that parses here starts nothing."""

    def __init__(self, config: ParseConfig):
        self._off = config.workers == 1
        self._read = _RunSize()

    def read(self, source: SourceFile) -> None:
        if self._off:
            return
        self._read.add(source)
        if not self._read.parses_here:
            _start_forkserver()
            self._off = True


def _forkserver_context() -> multiprocessing.context.ForkServerContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _start_forkserver() -> None:
    """What the pool's first worker would start: the server, importing PRELOAD; returns at once."""
    from multiprocessing import forkserver

    _forkserver_context()
    with _main_module_hidden():
        forkserver.ensure_running()


def _isolated(source: SourceFile) -> bool:
    file_format = BY_FILETYPE.get(source.filetype)  # an unknown one fails the same way here as in a worker
    return file_format is not None and file_format.isolated


def parse_one(source: SourceFile, config: ParseConfig) -> Outcome:
    try:
        return parse_document(source, config)
    except NothingToCite as exc:
        return exc.skipped
    except DocumentError as exc:
        return exc.error
    except Exception as exc:  # one bad document never sinks a run
        return IngestError(source.source_path, "parse", type(exc).__name__, str(exc) or repr(exc))


def _parse_groups(sources: list[SourceFile]) -> list[Group]:
    """The sources grouped by content, biggest first, for both paths. Copies of a file parse one after the
    other in one process, where unstructured's caches of what it computed per paragraph (spaCy) serve the
    later ones; sizes next to each other bring edited versions of a file together too. That halves the
    parse time of httpx-docs, whose releases repeat most files. And in a pool, no big document starts last
    while the other workers have run dry. (Only the order changes, never an outcome.)"""
    groups: dict[str, Group] = {}
    for index, source in enumerate(sources):
        groups.setdefault(source.content_hash, []).append((index, source))
    return sorted(groups.values(), key=lambda group: group[0][1].size_bytes, reverse=True)


def _runs(groups: list[Group], length: int) -> list[Group]:
    """Consecutive groups joined into runs of `length` documents or more (a group is never split)."""
    runs: list[Group] = [[]]
    for group in groups:
        if len(runs[-1]) >= length:
            runs.append([])
        runs[-1].extend(group)
    return runs


def _parse_serially(
    sources: list[SourceFile], config: ParseConfig, progress: Progress | None
) -> Iterator[tuple[int, Outcome]]:
    tasks = [task for group in _parse_groups(sources) for task in group]
    if tasks:  # load the parsers as the forkserver does, so that no document's time limit pays for it
        importlib.import_module("parsers.warm_worker")
    for done, (index, source) in enumerate(tasks, start=1):
        outcome = parse_one(source, config)
        if progress is not None:
            progress(source.source_path, done, len(sources))
        yield index, outcome


def _parse_in_pool(
    runs: list[Group], n_sources: int, config: ParseConfig, size: int, progress: Progress | None
) -> Iterator[tuple[int, Outcome]]:
    waiting = deque(runs)
    done = 0
    with closing(_Pool(size, config)) as pool:
        while waiting or pool.busy:
            while waiting and pool.has_room:
                pool.submit(waiting.popleft())
            for (index, source), outcome in pool.finished():
                done += 1
                if progress is not None:
                    progress(source.source_path, done, n_sources)
                yield index, outcome
            waiting.extendleft(pool.orphans())


def _serve(conn: Connection, config: ParseConfig, temp_dir: str) -> None:
    """A worker: parse each run the parent sends, sending back an outcome per document as it is done,
    until the parent hangs up. Its address space may grow by config.worker_memory_bytes at most: past it an
    allocation fails (the document is quarantined) or the worker dies (WorkerDied), never the machine.
    Everything it and the tools it starts write to a temp dir (rendered pages, Tesseract's `tess_*` input
    images) goes into its private `temp_dir`, which the parent removes however the worker ends."""
    os.setpgrp()  # its own process group: killing it kills the Poppler/Tesseract processes it started too
    os.environ["TMPDIR"] = tempfile.tempdir = temp_dir
    if config.worker_memory_bytes is not None:
        _cap_address_space(config.worker_memory_bytes)
    try:
        while True:
            for source in conn.recv():
                conn.send(parse_one(source, config))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):  # the parent closed our pipe, died or was interrupted
        return


def _kill_group(process: BaseProcess) -> None:
    if process.pid is None:  # never started
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # gone already, or not yet its own group
        process.kill()


def _remove_temp_dir(temp_dir: str) -> None:
    """A worker's private temp dir. A child of a killed worker may still be finishing a write: try again."""
    for _ in range(20):
        shutil.rmtree(temp_dir, ignore_errors=True)
        if not os.path.exists(temp_dir):
            return
        time.sleep(0.05)


def _cap_address_space(extra_bytes: int) -> None:
    with open("/proc/self/statm") as statm:  # Linux: the first field is the address space, in pages
        current = int(statm.read().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = current + extra_bytes
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While a worker starts, multiprocessing does not see the caller's __main__ (it reads __spec__ and
    __file__ to have each worker import it again): workers need nothing from it, the import costs ~0.4 s for
    the `citekeeper` command and more for a script that imports the store, a script without an
    `if __name__ == "__main__":` guard would run again, and a program read from stdin could not start a
    worker at all."""
    main = sys.modules["__main__"]
    saved = {name: getattr(main, name) for name in ("__file__", "__spec__") if hasattr(main, name)}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    temp_dir: str  # private (mode 0700): TMPDIR of the worker and of the tools it runs
    tasks: deque[tuple[int, SourceFile]] = field(default_factory=deque)  # its run's documents not done yet
    deadline: float = math.inf  # of the first of them


class _Pool:
    """At most `size` worker processes, each parsing one run at a time."""

    def __init__(self, size: int, config: ParseConfig):
        self._context = _forkserver_context()
        self._size = size
        self._timeout = config.parse_timeout_s
        self._config = replace(config, parse_timeout_s=None)  # workers run unlimited: the parent kills
        self._idle = [self._start() for _ in range(size)]
        self._busy: list[_Worker] = []
        self._orphans: list[Group] = []

    @property
    def busy(self) -> bool:
        return bool(self._busy)

    @property
    def has_room(self) -> bool:
        return len(self._busy) < self._size

    def submit(self, run: Group) -> None:
        """Hand a run to an idle worker (a new one, where a killed worker left its place empty)."""
        worker = self._idle.pop() if self._idle else self._start()
        sources = [source for _, source in run]
        try:
            worker.conn.send(sources)
        except OSError:  # it died while idle (the out-of-memory killer picks the biggest process, busy or not)
            self._end(worker)
            worker = self._start()
            worker.conn.send(sources)
        worker.tasks = deque(run)
        worker.deadline = self._deadline()
        self._busy.append(worker)

    def finished(self) -> list[tuple[tuple[int, SourceFile], Outcome]]:
        """((index, source), outcome) of each document done since the last call: answered, or its worker
        died or ran out of time. Waits until there is at least one."""
        while True:
            deadline = min(worker.deadline for worker in self._busy)
            timeout = None if deadline == math.inf else max(deadline - time.monotonic(), 0)
            wait([w.conn for w in self._busy] + [w.process.sentinel for w in self._busy], timeout)
            results = [result for worker in list(self._busy) for result in self._outcomes(worker)]
            if results:
                return results

    def orphans(self) -> list[Group]:
        """The documents killed workers had not reached yet: to parse on fresh workers, first."""
        orphans, self._orphans = self._orphans, []
        return orphans

    def close(self) -> None:
        for worker in self._busy:
            worker.process.kill()
        for worker in self._idle:
            worker.conn.close()  # the worker reads EOF and returns
        for worker in self._idle + self._busy:
            worker.process.join(timeout=10)
            if worker.process.exitcode is None:
                worker.process.kill()
            self._end(worker)
        self._idle, self._busy = [], []

    def _start(self) -> _Worker:
        parent_end, child_end = self._context.Pipe()
        temp_dir = tempfile.mkdtemp(prefix="citekeeper-parse-")  # mode 0700
        process = self._context.Process(
            target=_serve, args=(child_end, self._config, temp_dir), name="citekeeper-parse", daemon=True
        )
        with _main_module_hidden():
            process.start()
        child_end.close()
        return _Worker(process, parent_end, temp_dir)

    @staticmethod
    def _end(worker: _Worker) -> None:
        """Reap a worker that exited or was killed, and remove its temp dir."""
        worker.process.join()
        worker.conn.close()
        _remove_temp_dir(worker.temp_dir)

    def _deadline(self) -> float:
        return time.monotonic() + self._timeout if self._timeout else math.inf

    def _outcomes(self, worker: _Worker) -> list[tuple[tuple[int, SourceFile], Outcome]]:
        """What the worker has done since the last look: each outcome it sent, or its current document's
        error if it died or ran out of time."""
        results: list[tuple[tuple[int, SourceFile], Outcome]] = []
        while worker.conn.poll():
            try:
                outcome = worker.conn.recv()
            except (EOFError, ConnectionError):  # it died before answering
                return results + self._retire(worker, self._died(worker))
            results.append((worker.tasks.popleft(), outcome))
            worker.deadline = self._deadline()
            if not worker.tasks:
                self._busy.remove(worker)
                self._idle.append(worker)
                return results
        if worker.process.exitcode is not None:
            return results + self._retire(worker, self._died(worker))
        if time.monotonic() >= worker.deadline:
            return results + self._retire(worker, self._timed_out(worker))
        return results

    def _retire(self, worker: _Worker, error: IngestError) -> list[tuple[tuple[int, SourceFile], Outcome]]:
        """Kill the worker (if it still runs), remove what it left in the temp dir and free its place: submit()
        starts a new one when needed."""
        _kill_group(worker.process)
        self._end(worker)
        self._busy.remove(worker)
        task = worker.tasks.popleft()
        if worker.tasks:
            self._orphans.append(list(worker.tasks))
        return [(task, error)]

    def _timed_out(self, worker: _Worker) -> IngestError:
        reason = (
            f"parsing took longer than {self._timeout:g} s (parse_timeout_s); its worker process was "
            "killed and the file skipped"
        )
        return IngestError(worker.tasks[0][1].source_path, "parse", "ParseTimeout", reason)

    def _died(self, worker: _Worker) -> IngestError:
        worker.process.join()
        code = worker.process.exitcode
        assert code is not None, "a joined process has an exit code"
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        reason = f"the parser's worker process died ({how}: a crash or the out-of-memory killer); file skipped"
        return IngestError(worker.tasks[0][1].source_path, "parse", "WorkerDied", reason)
