"""Bombs against the default limits (issue #21): the peak memory of ingesting each one, and the time until it is
quarantined, against ingesting one ordinary document in the same run.

Each bomb is made here and ingested on its own (beside one good document) by `citekeeper ingest` in a fresh
process with the default settings (a pool of parse workers); the peak RSS of that process and of its largest
descendant are sampled every 50 ms. Target: every process at most 1,536 MB, and each bomb quarantined with the
limit it broke (the 5 MB one-line text, a document once its title is bounded, ingested). The 50 MB marker-form answer
and the claim of 100,000 citations go through `citekeeper answers add` the same way, each refused by its limit.

    .venv/bin/python bench/bench_bombs.py [--only NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import psutil

LIMIT_MB = 1536
GOOD = "Backups run every night and are kept for thirty days.\n"


def docx_zip_bomb(path: Path) -> None:
    """A docx holding a 2 GB member of zeros (2 MB compressed)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        archive.writestr("word/document.xml", '<?xml version="1.0"?><w:document/>')
        with archive.open("word/media/zeros.bin", "w", force_zip64=True) as member:
            block = b"\0" * 2**24
            for _ in range(128):
                member.write(block)


def xlsx_many_rows(path: Path, rows: int = 5_700_000) -> None:
    """A workbook of 5.7 M one-cell rows (the issue's 782 KB file: 16 k chunks, 275 s, 4.7 GB before)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "[Content_Types].xml",
            (
                '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                '<Default Extension="xml" ContentType="application/xml"/>'
                '<Override PartName="/xl/workbook.xml"'
                ' ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
                '<Override PartName="/xl/worksheets/sheet1.xml"'
                ' ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
                "</Types>"
            ),
        )
        archive.writestr(
            "_rels/.rels",
            (
                '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                '<Relationship Id="rId1"'
                ' Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"'
                ' Target="xl/workbook.xml"/>'
                "</Relationships>"
            ),
        )
        archive.writestr(
            "xl/_rels/workbook.xml.rels",
            (
                '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                '<Relationship Id="rId1"'
                ' Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet"'
                ' Target="worksheets/sheet1.xml"/>'
                "</Relationships>"
            ),
        )
        archive.writestr(
            "xl/workbook.xml",
            (
                '<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
                'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
                '<sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>'
            ),
        )
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            sheet.write(
                b'<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
            )
            for start in range(1, rows + 1, 100_000):
                sheet.write(
                    "".join(
                        f'<row r="{r}"><c r="A{r}"><v>{r}</v></c></row>'
                        for r in range(start, min(start + 100_000, rows + 1))
                    ).encode()
                )
            sheet.write(b"</sheetData></worksheet>")


def one_line_text(path: Path, size: int = 5 * 2**20) -> None:
    """One line without spaces: unstructured takes it for a title (1 MB gave 1 GB of section paths before)."""
    path.write_text("x" * size)


def billion_laughs(path: Path) -> None:
    entities = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    path.write_text(f'<?xml version="1.0"?><!DOCTYPE lolz [{"".join(entities)}]><lolz>&lol9;</lolz>')


def deep_sidecar(path: Path) -> None:
    path.write_text(GOOD)
    path.with_name(path.name + ".citekeeper.json").write_text("[" * 100_000 + "]" * 100_000)


def alias_bomb_front_matter(path: Path) -> None:
    lines = ['a0: &a0 "lol"'] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path.write_text("---\n" + "\n".join(lines) + "\ntitle: x\n---\n" + GOOD)


# file -> (maker, what must become of it): quarantined, or ingested within the memory target (the long line is
# a document; only its copies into every chunk were the bomb).
BOMBS = {
    "docx-zip-bomb.docx": (docx_zip_bomb, "quarantined"),
    "xlsx-5.7M-rows.xlsx": (xlsx_many_rows, "quarantined"),
    "one-line-5MB.txt": (one_line_text, "ingested"),
    "billion-laughs.xml": (billion_laughs, "quarantined"),
    "deep-sidecar.md": (deep_sidecar, "quarantined"),
    "alias-bomb.md": (alias_bomb_front_matter, "quarantined"),
}


def marker_answer(path: Path, size: int = 50 * 2**20) -> None:
    """A 50 MB marker-form answer (1.87 M claims and 10.1 GB in verify before)."""
    sentence = "The backup runs at night [1]. "
    record = {
        "answer_id": "huge",
        "answer": sentence * (size // len(sentence)),
        "corpus_version": "v1",
        "references": [{"ref": 1, "chunk_id": "ck_x"}],
    }
    path.write_text(json.dumps(record) + "\n")


def many_citations_answer(path: Path, n: int = 100_000) -> None:
    """One claim citing the same chunk 100,000 times (registered before, and `stale` ran past 300 s on it)."""
    citations = [{"chunk_id": "ck_x", "quote": f"backups run at night {i}"} for i in range(n)]
    record = {
        "answer_id": "cited-100k",
        "answer": "The backup runs at night.",
        "corpus_version": "v1",
        "claims": [{"text": "The backup runs at night.", "citations": citations}],
    }
    path.write_text(json.dumps(record) + "\n")


# answers file -> (maker, the limit that must refuse it)
ANSWER_BOMBS = {
    "marker-answer-50MB.jsonl": (marker_answer, "max_claims_per_answer"),
    "claim-100k-citations.jsonl": (many_citations_answer, "max_citations_per_claim"),
}


def run_measured(args: list[str]) -> dict:
    """Run `citekeeper ARGS` in a fresh process; its wall time, exit code, output and peak RSS (own, largest
    descendant) in MB."""
    started = time.perf_counter()
    command = [str(Path(sys.executable).with_name("citekeeper")), *args]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watched = psutil.Process(child.pid)
    own = largest = 0
    while child.poll() is None:
        try:
            own = max(own, watched.memory_info().rss)
            for process in watched.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    largest = max(largest, process.memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    output = child.stdout.read()
    return {
        "seconds": time.perf_counter() - started,
        "code": child.returncode,
        "output": output,
        "own_mb": own / 2**20,
        "worker_mb": largest / 2**20,
    }


def ingest_alone(base: Path, name: str, make) -> dict:
    source = base / name.replace(".", "_")
    source.mkdir()
    (source / "good.md").write_text(GOOD)
    if make is not None:
        make(source / name)
    return run_measured(["ingest", str(source), "--store", str(base / f"store-{source.name}")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="one bomb (file name) to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        baseline = ingest_alone(base, "baseline", None)
        print(
            f"baseline (one good document): {baseline['seconds']:.1f} s, own {baseline['own_mb']:.0f} MB, "
            f"largest worker {baseline['worker_mb']:.0f} MB"
        )
        worst = max(baseline["own_mb"], baseline["worker_mb"])
        failed = []
        for name, (make, expected) in BOMBS.items():
            if args.only and args.only != name:
                continue
            result = ingest_alone(base, name, make)
            quarantined = [
                line.strip() for line in result["output"].splitlines() if line.strip().startswith("quarantined ")
            ]
            peak = max(result["own_mb"], result["worker_mb"])
            outcome = "quarantined" if quarantined else "ingested"
            ok = peak <= LIMIT_MB and result["code"] == 0 and outcome == expected
            failed += [] if ok else [name]
            print(
                f"{name:22} {outcome} in {result['seconds']:5.1f} s; "
                f"peak own {result['own_mb']:5.0f} MB, largest worker {result['worker_mb']:5.0f} MB; "
                f"{peak / worst:.2f}x the baseline's peak; {'OK' if ok else 'MISSED'}"
            )
            for line in quarantined:
                print(f"    {line[:160]}")
        for name, (make, limit) in ANSWER_BOMBS.items():
            if args.only and args.only != name:
                continue
            answers = base / name
            make(answers)
            result = run_measured(["answers", "add", str(answers), "--store", str(base / "store-answers")])
            peak = max(result["own_mb"], result["worker_mb"])
            ok = limit in result["output"] and peak <= LIMIT_MB
            failed += [] if ok else [name]
            print(
                f"{name:22} {result['seconds']:6.1f} s until refused ({limit}); peak {peak:5.0f} MB; "
                f"{peak / worst:.2f}x the baseline's peak; {'OK' if ok else 'MISSED'}"
            )
        print(
            f"target: every process <= {LIMIT_MB} MB, each bomb quarantined (or refused; the long line ingested) -> "
            f"{'OK' if not failed else 'MISSED: ' + ', '.join(failed)}"
        )


if __name__ == "__main__":
    main()
