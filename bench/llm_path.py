"""4step with a real LLM against 4step-offline on seeded dev samples (issue 66): does the LLM path earn its place?

Uses the model behind ``OPENAI_BASE_URL`` (start one first: ``../shared/tools/local-llm.sh medium 8765``; its build
takes over 30 minutes on a busy machine), with the ``cpu-server`` LLM profile. Per set, the same sampled questions
both ways: Hit@1, seconds and LLM calls per question, tokens, cache hits, and what became of the LLM's readings
(not asked, used, merged, lost, rejected, failed, repaired, re-asked). Not in CI.

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=local KQE_LLM_MODEL=qwen2.5-coder-1.5b \\
        python bench/llm_path.py --kbs $KBS --userkg-kbs $KBS/userkg --sample 20 --seed 0 --out $RUN/llm_path.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = (ROOT / ".." / "shared" / "data").resolve()
sys.path.insert(0, str(ROOT))

from kqe_rdf.core.config import Settings  # noqa: E402
from kqe_rdf.evaluation.querysets import load  # noqa: E402
from kqe_rdf.evaluation.runner import READING_OUTCOMES, evaluate, reading_counts  # noqa: E402
from kqe_rdf.kb.knowledge_base import KnowledgeBase  # noqa: E402
from kqe_rdf.methods.registry import pipeline  # noqa: E402

#: (name, query set, files under ../shared/data, KB under --kbs, eval options)
SETS = [
    ("metaqa-1-hop", "metaqa", ["metaqa/1-hop/dev.txt.gz"], "metaqa", {}),
    ("metaqa-2-hop", "metaqa", ["metaqa/2-hop/dev.txt.gz"], "metaqa", {}),
    ("pq-2h", "irn", ["pq/PQ-2H.dev.txt.gz"], "pq2", {}),
    ("phenopackets", "phenopackets", ["phenopackets/dev.jsonl.gz"], "bio", {"types": ["Disease"]}),
]
#: The user graphs: (name, build kind, graph file, question files) under ../shared/data/userkg.
USERKG = [
    ("family", "triples", "family/family.tsv", ["family/questions.tsv", "family/questions_extra.tsv"]),
    ("music", "rdf", "music/music.ttl", ["music/questions.tsv"]),
    ("nobel", "rdf", "nobel/nobel.ttl.gz", ["nobel/questions.tsv"]),
]
METHODS = ("4step-offline", "4step")


def sampled(qs, n: int, seed: int):
    """The same draw as ``kqe-rdf eval --sample N --seed S``."""
    if n < len(qs):
        qs.queries = [qs.queries[i] for i in sorted(random.Random(seed).sample(range(len(qs)), n))]
    return qs


def asked(explain: dict[str, dict]) -> list[dict]:
    """Per question the LLM was asked about: why, what became of its reading and why (for the JSON output)."""
    return [{"qid": qid, **{k: e["llm_reading"].get(k) for k in ("why_asked", "outcome", "why", "repairs")}}
            for qid, e in explain.items() if e.get("llm_reading", {}).get("asked")]


def row(name: str, method: str, hit: float, n: int, seconds: float, usage: dict | None, counts: dict,
        readings: list[dict] | None = None) -> dict:
    out = {"set": name, "method": method, "questions": n, "Hit@1": round(hit, 4), "s/question": round(seconds / n, 2)}
    if usage is not None:
        out.update({"llm calls/question": round((usage["calls"] + usage.get("cache_hits", 0)) / n, 2),
                    "tokens/question": round((usage["prompt_tokens"] + usage["completion_tokens"]
                                              + usage.get("cached_tokens", 0)) / n, 1),
                    "cache hits": usage.get("cache_hits", 0), "failures": usage.get("failures", 0)})
    out.update({k.replace("llm reading ", ""): v for k, v in counts.items()})
    if readings:
        out["asked"] = readings
    return out


def eval_set(name, queryset, files, kb_dir, options, settings, n, seed) -> list[dict]:
    kb = KnowledgeBase.open(kb_dir)
    qs = sampled(load(queryset, *[DATA / f for f in files]), n, seed)
    result = evaluate(kb, qs, list(METHODS), settings, depth=100, types=options.get("types"))
    out = []
    for r in result.results:
        usage = r.llm_usage if r.method == "4step" else None
        out.append(row(name, r.method, r.metrics.get("Hit@1", 0.0), len(qs), r.seconds, usage,
                       reading_counts(r.explain) if r.method == "4step" else {}, asked(r.explain)))
    return out


def _local(iri: str) -> str:
    return re.split(r"[/#]", iri.rstrip("/"))[-1].lower()


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def userkg_set(name, kind, graph, questions, kb_root: Path, settings) -> list[dict]:
    """A user graph (built once under ``kb_root``) scored as ``userkg/score.py`` scores ``search``: rank 1 right."""
    kb_dir = kb_root / name
    if not (kb_dir / "manifest.json").exists():
        source = DATA / "userkg" / graph
        if source.suffix == ".gz":
            plain = kb_root / source.stem
            subprocess.run(f"gzip -dc {source} > {plain}", shell=True, check=True)
            source = plain
        subprocess.run([sys.executable, "-m", "kqe_rdf", "kb", "build", kind, str(source), "--kb", str(kb_dir)],
                       check=True, capture_output=True, cwd=ROOT)
    kb = KnowledgeBase.open(kb_dir)
    rows = [line.rstrip("\n").split("\t") for f in questions for line in open(DATA / "userkg" / f)
            if line.strip() and not line.startswith("#")]
    out = []
    for method in METHODS:
        stage = pipeline(method, kb, settings, 10)
        right, explain, start = 0, {}, time.perf_counter()
        for qid, text, gold in rows:
            wanted = {_norm(g) for g in gold.split(",")}
            batch = stage.run(text, qid)
            hits = batch.ranked(qid)
            if hits:
                top = hits[0].iri
                if top.startswith('"'):  # a value ("2022"^^xsd:gYear): its lexical form
                    right += _norm(top[1:].split('"', 1)[0]) in wanted
                else:
                    right += _local(top) in wanted or _norm(kb.document(top).name or "") in wanted
            explain[qid] = batch.explain.get(qid, {})
        seconds = time.perf_counter() - start
        llm = getattr(stage, "llm", None)
        usage = llm.usage.as_dict() if llm is not None and method == "4step" else None
        out.append(row(f"userkg-{name}", method, right / len(rows), len(rows), seconds, usage,
                       reading_counts(explain) if method == "4step" else {}, asked(explain)))
    return out


def markdown(rows: list[dict]) -> str:
    columns = ["set", "method", "questions", "Hit@1", "s/question", "llm calls/question", "tokens/question",
               "cache hits", *READING_OUTCOMES, "repaired", "re-asked"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kbs", type=Path, default=Path("/work/kbs"))
    parser.add_argument("--userkg-kbs", type=Path, default=Path("/tmp/userkg-kbs"))
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sets", nargs="*", default=None, help="names of sets to run (default: all)")
    parser.add_argument("--cache", default="off", help="the LLM response cache (default off: every call is real)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not os.environ.get("OPENAI_BASE_URL"):
        sys.exit("set OPENAI_BASE_URL (and KQE_LLM_MODEL) to a running model: ../shared/tools/local-llm.sh medium")
    settings = Settings.load(llm_profile="cpu-server", llm_cache=args.cache)
    args.userkg_kbs.mkdir(parents=True, exist_ok=True)
    wanted = set(args.sets) if args.sets else None
    rows: list[dict] = []
    for name, queryset, files, kb, options in SETS:
        if wanted is None or name in wanted:
            rows += eval_set(name, queryset, files, args.kbs / kb, options, settings, args.sample, args.seed)
            print(markdown(rows[-2:]), flush=True)
    for name, kind, graph, questions in USERKG:
        if wanted is None or f"userkg-{name}" in wanted:
            rows += userkg_set(name, kind, graph, questions, args.userkg_kbs, settings)
            print(markdown(rows[-2:]), flush=True)
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(markdown(rows))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "load": load, "argv": sys.argv}, indent=1))


if __name__ == "__main__":
    main()
