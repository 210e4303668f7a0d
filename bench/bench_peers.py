"""citekeeper's incremental reindex against LangChain's indexing API and a LlamaIndex IngestionPipeline.

The corpus is bench_reindex.py's (`build_corpus`, imported: every httpx-docs release tag, twice over), and so
is the change (`change`, imported: a paragraph appended to 1% of the documents, other ones each round). Each
system runs in a fresh child process, one after the other, on its own copy of the corpus: a warm-up (imports,
and one file parsed, so unstructured's and spaCy's lazy loads are not timed), a timed full index of the tree,
then `--rounds` times (default 2, as bench_reindex.py) the change of that round and a timed incremental
re-index. The ratio is per round: the same documents changed for every system. A last child times the bare
parse of every file, the floor of anything that re-loads every document.

Every system parses each file with citekeeper's own per-file parse (parsers.document.parse_document:
unstructured's partitioner for the format, the canonical text, citekeeper's chunker), so all three hold the
same chunks and the only difference is how each learns what changed:

- citekeeper (`parsers.ingest.ingest`, `--workers 1` by default: one process parses, as in the peers): hashes
  every file's bytes and compares them with the parent version's documents; parses only what differs; the new
  version drops the changed documents' chunks and adds their new ones.
- LangChain (`langchain_core.indexing.index(..., cleanup="incremental", source_id_key="source")`, a
  `SQLRecordManager` on SQLite, an `InMemoryVectorStore` with `DeterministicFakeEmbedding`): its loader must
  parse and chunk every document again; index() hashes every chunk, looks each hash up in the record manager,
  adds what it has not seen, refreshes the timestamp of the rest, and deletes the records of each batch's
  sources not refreshed yet. That last step runs per batch (`batch_size`, default 100), so a document whose
  chunks straddle two batches loses the chunks of the later batch, which are then re-added: chunks of
  unchanged documents are deleted and re-added on every run (langchain-ai/langchain#32612).
- LlamaIndex (`IngestionPipeline` with a `SimpleDocumentStore`, a `SimpleVectorStore`, `MockEmbedding` and
  `DocstoreStrategy.UPSERTS_AND_DELETE`): its reader must parse every document again into one Document per
  file; the pipeline compares each Document's hash with the docstore's, deletes a changed document's nodes
  from the vector store, and re-chunks it (a transformation that hands over the chunks the parse made).

Both peers keep their stores in the memory of the child from one run to the next, as a long-running process
would; a nightly job would also have to persist and reload them, which is not timed here. The figures: each
one's full and incremental wall and CPU time, the chunks each deleted and re-added in each incremental run, and
each child's peak RSS (VmHWM: this process's own high-water mark, warm-up included). Target: citekeeper's
incremental re-index >= 50x faster than each peer's (wall time), re-adding only the changed documents' chunks.
The CPU-time ratio is printed too: on a shared machine wall time swings with other people's load.

    .venv/bin/python bench/bench_peers.py [--source DIR] [--documents N] [--rounds N] [--workers N]
                                          [--langchain-batch-size N] [--peer-order path|parse]
                                          [--only SYSTEM ...]

The peers load files in path order, as a directory loader lists them; `--peer-order parse` hands them (and the
bare parse) the files in the order citekeeper's ingest parses them (copies and same-sized files together),
where unstructured's per-paragraph caches serve the repeats, as they serve citekeeper's full ingest.

`--documents 40 --rounds 1` runs in about 2 minutes on the 2-core machine. The peers come from the bench
extra: `.venv/bin/pip install -c constraints.txt -e ".[bench]"`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
os.environ.setdefault("SCARF_NO_ANALYTICS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LANGSMITH_TRACING", "false")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.bench_ingest import DEFAULT_SOURCE, Timer, parse_order  # noqa: E402
from bench.bench_reindex import build_corpus, change  # noqa: E402

TARGET = 50.0
SYSTEMS = ("citekeeper", "langchain", "llamaindex", "parse")
PEERS = ("langchain", "llamaindex")
EMBEDDING_DIM = 384  # the bundled all-MiniLM-L6-v2's; the fake embeddings only need a size
RESULT = "RESULT "


def memory_mb(field: str) -> float:
    """VmHWM (peak) or VmRSS of this process, in MB: per address space, so a child does not inherit the peak
    of the process it was started from (ru_maxrss would)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def documents_of(corpus: Path) -> list[Path]:
    return sorted(corpus.rglob("*.md"))


PEER_ORDER = "path"  # set by --peer-order in the child


def sources_of(corpus: Path):
    """The files as citekeeper's discovery names them (doc_id = posix path under the corpus), in the order the
    peers load them: by path, as a directory loader lists them, or (--peer-order parse) in the order
    citekeeper's ingest parses them, copies and same-sized files together, so that unstructured's per-paragraph
    caches serve the repeats (bench_ingest.parse_order)."""
    from parsers.discover import discover_sources
    from parsers.records import ParseConfig

    sources, errors = discover_sources(corpus, ParseConfig(workers=1))
    assert not errors, errors
    if PEER_ORDER == "parse":
        rank = {path: i for i, path in enumerate(parse_order([source.path for source in sources]))}
        sources = sorted(sources, key=lambda source: rank[source.path])
    return sources


def parse(source):
    """citekeeper's parse of one file: unstructured partition, canonical text, chunks."""
    from parsers.document import parse_document
    from parsers.records import ParseConfig

    return parse_document(source, ParseConfig(workers=1))


def warm_up(corpus: Path) -> None:
    parse(sources_of(documents_of(corpus)[0].parent)[0])


# ---------------------------------------------------------------------- the systems (one per child process)


class Citekeeper:
    def __init__(self, work: Path, workers: int | None):
        from citekeeper.store import CorpusStore
        from parsers.ingest import ingest
        from parsers.records import ParseConfig

        self.ingest, self.config = ingest, ParseConfig(workers=workers)
        self.store = CorpusStore(work / "store")
        self.parent = None

    def warm_up(self, corpus: Path, work: Path) -> None:
        from citekeeper.store import CorpusStore

        self.ingest(documents_of(corpus)[0].parent, CorpusStore(work / "warmup"), config=self.config)

    def index(self, corpus: Path) -> None:
        self.result = self.ingest(corpus, self.store, config=self.config)

    def counts(self, corpus: Path, changed_ids: list[str]) -> dict:
        result = self.result
        assert result.created, "the tree equals the latest version"
        new = result.manifest.name
        counts = {
            "stored": result.manifest.n_chunks,
            "parsed_documents": result.n_parsed,
            "phases": {phase: round(seconds, 3) for phase, seconds in result.durations_s.items()},
        }
        if self.parent is not None:
            assert result.n_parsed == len(changed_ids), (result.n_parsed, len(changed_ids))
            deleted = self.store.read_chunks(self.parent, ["chunk_id"], doc_ids=changed_ids).height
            added = self.store.read_chunks(new, ["chunk_id"], doc_ids=changed_ids).height
            # The new version replaces the changed documents' rows and carries over every other row: only
            # those documents' chunks went and came (checked against both versions' totals).
            assert result.manifest.n_chunks == self.store.manifest(self.parent).n_chunks - deleted + added
            counts |= {"deleted": deleted, "deleted_unchanged": 0, "added": added, "changed_documents_chunks": added}
            # What learning what changed costs: reading and hashing every file (discovery), and the parent's
            # documents table; the rest of the stage is parsing the changed documents.
            from parsers.discover import discover_sources

            with Timer() as discovery:
                discover_sources(corpus, self.config)
                self.store.read_documents(self.parent)
            counts["find_changes_s"] = discovery.wall
        self.parent = new
        return counts


class LangChain:
    def __init__(self, work: Path, batch_size: int):
        warnings.filterwarnings("ignore", module="langchain_core")  # SHA-1 key encoder, the default
        from langchain_classic.indexes import SQLRecordManager
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_core.indexing import index
        from langchain_core.vectorstores import InMemoryVectorStore

        deleted_sources: list[str] = []  # the source of every chunk index() deletes from the vector store
        self.deleted_sources = deleted_sources

        class CountingVectorStore(InMemoryVectorStore):
            def delete(self, ids=None, **kwargs):
                deleted_sources.extend(self.store[i]["metadata"]["source"] for i in ids or () if i in self.store)
                super().delete(ids, **kwargs)

        self.index_fn, self.batch_size = index, batch_size
        self.vector_store = CountingVectorStore(embedding=DeterministicFakeEmbedding(size=EMBEDDING_DIM))
        self.record_manager = SQLRecordManager("bench_peers", db_url=f"sqlite:///{work / 'records.sqlite'}")
        self.record_manager.create_schema()

    def warm_up(self, corpus: Path, work: Path) -> None:
        warm_up(corpus)

    def load(self, corpus: Path):
        """A lazy loader: every file parsed and chunked, one Document per chunk."""
        from langchain_core.documents import Document

        for source in sources_of(corpus):
            for chunk in parse(source).chunks:
                yield Document(page_content=chunk.text, metadata={"source": source.doc_id})

    def index(self, corpus: Path) -> None:
        self.deleted_sources.clear()
        self.result = self.index_fn(
            self.load(corpus),
            self.record_manager,
            self.vector_store,
            cleanup="incremental",
            source_id_key="source",
            batch_size=self.batch_size,
        )

    def counts(self, corpus: Path, changed_ids: list[str]) -> dict:
        result, changed = self.result, set(changed_ids)
        assert len(self.deleted_sources) == result["num_deleted"], (len(self.deleted_sources), result)
        return {
            "stored": len(self.vector_store.store),
            "deleted": result["num_deleted"],
            "deleted_unchanged": sum(1 for source in self.deleted_sources if source not in changed),
            "added": result["num_added"] + result["num_updated"],
            "skipped": result["num_skipped"],
            "changed_documents_chunks": sum(
                1 for d in self.vector_store.store.values() if d["metadata"]["source"] in changed
            ),
            "parsed_documents": len(sources_of(corpus)),
        }


class LlamaIndex:
    def __init__(self, work: Path):
        from llama_index.core.embeddings import MockEmbedding
        from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
        from llama_index.core.schema import NodeRelationship, TextNode, TransformComponent
        from llama_index.core.storage.docstore import SimpleDocumentStore
        from llama_index.core.vector_stores import SimpleVectorStore

        parsed: dict[str, list] = {}  # doc_id -> its chunks, from the reader's parse of this run
        self.parsed = parsed

        class CitekeeperChunks(TransformComponent):
            """The chunks citekeeper's chunker made of each Document when the reader parsed it."""

            def __call__(self, nodes, **kwargs):
                return [
                    TextNode(
                        id_=chunk.chunk_id,
                        text=chunk.text,
                        metadata=dict(node.metadata),
                        relationships={NodeRelationship.SOURCE: node.as_related_node_info()},
                    )
                    for node in nodes
                    for chunk in parsed[node.id_]
                ]

        from pydantic import PrivateAttr

        class CountingVectorStore(SimpleVectorStore):
            _deleted_refs: list[str] = PrivateAttr(default_factory=list)  # one ref_doc_id per node deleted

            def delete(self, ref_doc_id: str, **kwargs) -> None:
                refs = self.data.text_id_to_ref_doc_id.values()
                self._deleted_refs.extend(ref for ref in refs if ref == ref_doc_id)
                super().delete(ref_doc_id, **kwargs)

        self.vector_store = CountingVectorStore()
        self.pipeline = IngestionPipeline(
            transformations=[CitekeeperChunks(), MockEmbedding(embed_dim=EMBEDDING_DIM)],
            docstore=SimpleDocumentStore(),
            vector_store=self.vector_store,
            docstore_strategy=DocstoreStrategy.UPSERTS_AND_DELETE,
        )

    def warm_up(self, corpus: Path, work: Path) -> None:
        warm_up(corpus)

    def load(self, corpus: Path) -> list:
        """The reader: every file parsed, one Document per file (doc_id as its id)."""
        from llama_index.core import Document

        documents = []
        for source in sources_of(corpus):
            parsed = parse(source)
            self.parsed[source.doc_id] = parsed.chunks
            documents.append(Document(id_=source.doc_id, text=parsed.text, metadata={"source": source.doc_id}))
        return documents

    def stored(self) -> int:
        return len(self.vector_store.data.embedding_dict)

    def index(self, corpus: Path) -> None:
        self.before = self.stored()
        self.vector_store._deleted_refs.clear()
        self.nodes = self.pipeline.run(documents=self.load(corpus))
        self.parsed.clear()

    def counts(self, corpus: Path, changed_ids: list[str]) -> dict:
        before, nodes, after, changed = self.before, self.nodes, self.stored(), set(changed_ids)
        refs = self.vector_store.data.text_id_to_ref_doc_id
        deleted = self.vector_store._deleted_refs
        assert len(deleted) == before + len(nodes) - after, (len(deleted), before, len(nodes), after)
        return {
            "stored": after,
            "deleted": len(deleted),
            "added": len(nodes),
            "deleted_unchanged": sum(1 for ref in deleted if ref not in changed),
            "parsed_documents": len(sources_of(corpus)),
            "rechunked_documents": len({n.ref_doc_id for n in nodes}),
            "changed_documents_chunks": sum(1 for ref in refs.values() if ref in changed),
        }


def run_child(system: str, corpus: Path, work: Path, rounds: int, workers: int | None, batch_size: int) -> dict:
    """One full index, then `rounds` incremental re-indexes, round r after bench_reindex's change(r)."""
    if system == "parse":
        warm_up(corpus)
        with Timer() as timer:
            n_chunks = sum(len(parse(source).chunks) for source in sources_of(corpus))
        return {
            "system": system,
            "parse": {"wall": timer.wall, "cpu": timer.cpu},
            "chunks": n_chunks,
            "peak_rss_mb": memory_mb("VmHWM"),
        }
    tree = work / "corpus"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(corpus, tree)
    engine = {
        "citekeeper": lambda: Citekeeper(work, workers),
        "langchain": lambda: LangChain(work, batch_size),
        "llamaindex": lambda: LlamaIndex(work),
    }[system]()
    engine.warm_up(tree, work)
    rss_after_warm_up = memory_mb("VmRSS")
    with Timer() as full:
        engine.index(tree)
    out = {"system": system, "full": {"wall": full.wall, "cpu": full.cpu, **engine.counts(tree, [])}, "rounds": []}
    for round_index in range(rounds):
        changed = change(documents_of(tree), round_index)
        changed_ids = [path.relative_to(tree).as_posix() for path in changed]
        with Timer() as incremental:
            engine.index(tree)
        counts = engine.counts(tree, changed_ids)
        share = sum(path.stat().st_size for path in changed) / sum(p.stat().st_size for p in documents_of(tree))
        out["rounds"].append(
            {
                "wall": incremental.wall,
                "cpu": incremental.cpu,
                **counts,
                "changed": changed_ids,
                "changed_bytes_share": share,
            }
        )
    return out | {"peak_rss_mb": memory_mb("VmHWM"), "rss_after_warm_up_mb": rss_after_warm_up}


# ---------------------------------------------------------------------- the parent


def spawn(system: str, corpus: Path, work: Path, args: argparse.Namespace) -> dict:
    command = [
        sys.executable,
        __file__,
        "--child",
        system,
        "--corpus",
        str(corpus),
        "--work",
        str(work),
        "--rounds",
        str(args.rounds),
        "--workers",
        str(args.workers),
        "--langchain-batch-size",
        str(args.langchain_batch_size),
        "--peer-order",
        args.peer_order,
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        sys.exit(f"{system} failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][len(RESULT) :])


def report(results: dict[str, dict], args: argparse.Namespace, n_documents: int) -> None:
    load = os.getloadavg()
    mode = "serial (workers=1)" if args.workers == 1 else f"workers={args.workers or 'one per usable CPU'}"
    print(
        f"documents: {n_documents}; one full index, then {args.rounds} incremental round(s); citekeeper parses "
        f"{mode}; LangChain batch_size={args.langchain_batch_size}; the peers and the bare parse load files in "
        f"{args.peer_order} order; load average now {load[0]:.1f}"
    )
    if "parse" in results:
        parse = results["parse"]["parse"]
        print(
            f"bare parse of every file: {parse['wall']:.2f} s wall ({parse['cpu']:.2f} s CPU), "
            f"{results['parse']['chunks']} chunks; peak RSS {results['parse']['peak_rss_mb']:.0f} MB"
        )
    for system in ("citekeeper", *PEERS):
        if system not in results:
            continue
        result, full = results[system], results[system]["full"]
        print(
            f"{system}: full index {full['wall']:.2f} s wall ({full['cpu']:.2f} s CPU), {full['stored']} chunks "
            f"stored; peak RSS {result['peak_rss_mb']:.0f} MB "
            f"(after warm-up {result['rss_after_warm_up_mb']:.0f} MB)"
        )
        for round_index, run in enumerate(result["rounds"]):
            print(
                f"  round {round_index} incremental: {run['wall']:.2f} s wall ({run['cpu']:.2f} s CPU; "
                f"incremental/full {run['wall'] / full['wall']:.4f}); deleted {run['deleted']} chunks "
                f"({run['deleted_unchanged']} of unchanged documents), re-added {run['added']} (the changed "
                f"documents hold {run['changed_documents_chunks']})"
                + (f", skipped {run['skipped']}" if "skipped" in run else "")
                + f"; parsed {run['parsed_documents']} documents"
                + (f", re-chunked {run['rechunked_documents']}" if "rechunked_documents" in run else "")
                + (
                    " (" + ", ".join(f"{k} {v:.2f} s" for k, v in run["phases"].items()) + ")"
                    if "phases" in run
                    else ""
                )
                + (
                    f"; finding what changed (discovery and the parent's documents, timed apart) "
                    f"{run['find_changes_s']:.2f} s"
                    if "find_changes_s" in run
                    else ""
                )
            )
    if "citekeeper" not in results:
        return
    for round_index, ours in enumerate(results["citekeeper"]["rounds"]):
        only_changed = (
            ours["parsed_documents"] == len(ours["changed"])
            and ours["deleted_unchanged"] == 0
            and ours["added"] == ours["changed_documents_chunks"]
        )
        print(
            f"round {round_index}: {len(ours['changed'])} changed documents ({ours['changed_bytes_share']:.2%} of "
            f"the corpus bytes: {', '.join(ours['changed'])}); citekeeper re-added only their chunks: "
            f"{'yes' if only_changed else 'NO'}"
        )
        for peer in PEERS:
            if peer in results:
                theirs = results[peer]["rounds"][round_index]
                ratio = theirs["wall"] / ours["wall"]
                verdict = "OK" if ratio >= TARGET and only_changed else "MISSED"
                print(
                    f"  ratio {peer} incremental / citekeeper incremental (wall time): {ratio:.1f}x "
                    f"(target >= {TARGET:g}x) -> {verdict}; CPU-time ratio {theirs['cpu'] / ours['cpu']:.1f}x"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument(
        "--documents",
        type=int,
        default=None,
        help="keep this many documents of the corpus, spread over it (default: all)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="incremental re-indexes after the full index, round r after change(r) (default 2, as bench_reindex.py)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="citekeeper's parse workers (default 1, as the peers; 0: one per usable CPU)",
    )
    parser.add_argument("--langchain-batch-size", type=int, default=100, help="index()'s batch_size (default 100)")
    parser.add_argument(
        "--peer-order",
        choices=("path", "parse"),
        default="path",
        help="the order the peers and the bare parse load files in: by path (default, as a "
        "directory loader does) or citekeeper's parse order",
    )
    parser.add_argument("--only", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    workers = args.workers or None
    global PEER_ORDER
    PEER_ORDER = args.peer_order
    if args.child:
        result = run_child(args.child, args.corpus, args.work, args.rounds, workers, args.langchain_batch_size)
        print(RESULT + json.dumps(result))
        return
    with tempfile.TemporaryDirectory() as scratch:
        corpus = Path(scratch) / "corpus"
        documents = build_corpus(args.source, corpus)
        if args.documents and args.documents < len(documents):
            keep = {documents[i * len(documents) // args.documents] for i in range(args.documents)}
            for path in set(documents) - keep:
                path.unlink()
            documents = documents_of(corpus)
        results = {}
        for system in [s for s in SYSTEMS if s in args.only]:
            results[system] = spawn(system, corpus, Path(scratch) / system, args)
            print(f"  ran {system}", file=sys.stderr, flush=True)
    report(results, args, len(documents))


if __name__ == "__main__":
    main()
