"""Hybrid by score fusion: each side weighed by how well it does on this KB (a weight fitted with `kb tune-fusion`)
or on this request (how far each side's best match stands out), never dragged down by a useless side."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from kqe_rdf.cli import cli
from kqe_rdf.core.config import Settings
from kqe_rdf.core.errors import KqeError
from kqe_rdf.evaluation.fusion import fit_fusion
from kqe_rdf.evaluation.querysets import load
from kqe_rdf.evaluation.runner import evaluate
from kqe_rdf.kb.build import build_kb, record_fusion
from kqe_rdf.kb.embeddings import write_dense_index
from kqe_rdf.kb.importers.jsonl import JsonlImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.methods.registry import pipeline
from kqe_rdf.methods.retrieval import BM25, Dense, ScoreFusion, FusionWeight
from support.products import write_jsonl

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def made_up_words(count: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(3)))
    return sorted(words)


@pytest.fixture(scope="module")
def noise_kb(tmp_path_factory, kb):
    """240 notes of made-up words, each with six words of its own among twelve common ones, 80 requests naming
    three of a note's words and one stray word (TREC topics and qrels), and a dense index of **random** vectors
    (the packaged encoder's name, so queries are embedded as for any KB): a dense side that knows nothing."""
    rng = random.Random(7)
    words = made_up_words(240 * 6 + 12, rng)
    common, own = words[:12], words[12:]
    lines, topics, qrels = [], [], []
    for n in range(240):
        mine = own[6 * n : 6 * n + 6]
        text = " ".join(rng.sample(mine + rng.sample(common, 6), 12))
        lines.append(json.dumps({"kind": "node", "id": f"n{n}", "type": "Product", "name": f"Note {n}",
                                 "fields": {"description": text}}))
        if n % 3 == 0:
            asked = rng.sample(mine, 3) + [rng.choice(own)]
            topics.append(f"{n}\t{' '.join(asked)}")
            qrels.append(f"{n} 0 n{n} 1")
    folder = tmp_path_factory.mktemp("noise")
    source = write_jsonl(folder / "notes.jsonl", "\n".join(lines) + "\n")
    build_kb(JsonlImporter([source]), folder / "kb")
    documents = list(KnowledgeBase.open(folder / "kb").documents())
    vectors = np.random.default_rng(0).normal(size=(len(documents), kb.encoder.dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    write_dense_index(folder / "kb" / "embeddings", [(d.iri, d.digest) for d in documents], vectors,
                      kb.encoder.model_id, [d.types for d in documents], None, None, kb.encoder.fingerprint)
    (folder / "topics.tsv").write_text("\n".join(topics) + "\n")
    (folder / "qrels.txt").write_text("\n".join(qrels) + "\n")
    return KnowledgeBase.open(folder / "kb"), folder / "topics.tsv", folder / "qrels.txt"


def scores(kb, topics, qrels, methods, settings=None):
    result = evaluate(kb, load("trec", topics, qrels), methods, settings or Settings(), depth=100)
    return {r.method: r.metrics["nDCG@10"] for r in result.results}


def test_with_a_useless_dense_side_hybrid_keeps_bm25s_ranking_quality(noise_kb):
    kb, topics, qrels = noise_kb
    got = scores(kb, topics, qrels, ["bm25", "dense", "hybrid", "hybrid-rrf"])
    assert got["bm25"] > 0.8 and got["dense"] < 0.1  # BM25 finds the notes; random vectors do not
    assert got["hybrid"] >= got["bm25"] - 0.005
    assert got["hybrid-rrf"] < got["bm25"] - 0.05  # what reciprocal rank fusion did: the random side drags it down


def test_a_random_dense_side_stays_at_chance_and_a_real_one_stands_out(noise_kb, kb):
    noise, topics, _qrels = noise_kb
    random_side = Dense(noise, 10, confidence=True).run(first_request(topics)).explain["q"]
    assert random_side["confidence"] < 0.2
    assert random_side["margin"]["z"] < random_side["margin"]["chance"] + 0.5
    real = Dense(kb, 10, confidence=True).run("tripod that folds small for travel").explain["q"]
    assert real["margin"]["z"] > real["margin"]["chance"]


def first_request(topics) -> str:
    return topics.read_text().splitlines()[0].split("\t")[1]


def test_the_explanation_shows_each_sides_weight_and_why(noise_kb):
    kb, topics, _qrels = noise_kb
    how = pipeline("hybrid", kb, Settings(), 5).run(first_request(topics)).explain["q"]["fusion"]
    assert set(how["weights"]) == {"BM25", "Dense"} and sum(how["weights"].values()) == pytest.approx(1)
    assert how["weighed by"] == "request" and how["weights"]["BM25"] > 0.9
    assert how["margins"]["Dense"]["chance"] > 0


def test_search_explain_prints_the_weights(kb):
    out = CliRunner().invoke(cli, ["search", "tripod that folds small for travel", "--kb", str(kb.path),
                                   "-m", "hybrid", "--explain"])
    assert out.exit_code == 0, out.output
    assert "fusion: BM25 0." in out.output and "Dense 0." in out.output
    assert "best match z" in out.output and "agreement of the two top 10s" in out.output


def test_a_set_weight_of_one_or_zero_is_bm25_or_dense_alone(kb):
    text = "a camera for wildlife photography compatible with my Nikon F-mount lenses"
    as_bm25 = pipeline("hybrid", kb, Settings(hybrid_weight="1"), 5).search(text, names=False)
    as_dense = pipeline("hybrid", kb, Settings(hybrid_weight="0"), 5).search(text, names=False)
    assert [h.iri for h in as_bm25] == [h.iri for h in BM25(kb, 5).search(text, names=False)]
    assert [h.iri for h in as_dense] == [h.iri for h in Dense(kb, 5).search(text, names=False)]
    with pytest.raises(KqeError, match="hybrid_weight must be 'auto' or BM25's share between 0 and 1"):
        Settings(hybrid_weight="1.5")


def test_score_fusion_weighs_two_rankings_only(kb):
    with pytest.raises(KqeError, match="weighs two rankings, not 3"):
        ScoreFusion([BM25(kb), Dense(kb), BM25(kb)], FusionWeight(0.5))


def test_tune_fusion_fits_on_one_half_and_hybrid_holds_on_the_other(noise_kb, tmp_path):
    import shutil

    kb, topics, qrels = noise_kb
    shutil.copytree(kb.path, tmp_path / "kb")
    run = CliRunner().invoke
    out = run(cli, ["kb", "tune-fusion", "trec", str(topics), str(qrels), "--kb", str(tmp_path / "kb"),
                    "--half", "1"])
    assert out.exit_code == 0, out.output
    fit = json.loads(out.stdout)
    assert "kept in" in out.stderr
    assert fit["kept"] and fit["bm25_weight"] > 0.5 and fit["fitted"] >= max(fit["bm25"], fit["dense"])
    assert "half 1 of 2" in fit["queryset"] and set(fit["grid"]) == {"minmax", "zscore"}
    tuned = KnowledgeBase.open(tmp_path / "kb")
    assert tuned.manifest["fusion"]["bm25_weight"] == fit["bm25_weight"]
    how = pipeline("hybrid", tuned, Settings(), 5).run(first_request(topics)).explain["q"]["fusion"]
    assert how["weighed by"].startswith("fitted on trec") and how["weights"]["BM25"] == fit["bm25_weight"]

    held_out = load("trec", topics, qrels).half(2)
    result = evaluate(tuned, held_out, ["bm25", "hybrid"], Settings(), depth=100)
    bm25, hybrid = (r.metrics["nDCG@10"] for r in result.results)
    assert hybrid >= bm25 - 0.005

    forgot = run(cli, ["kb", "tune-fusion", "trec", str(topics), str(qrels), "--kb", str(tmp_path / "kb"), "--forget"])
    assert forgot.exit_code == 0 and "fusion" not in KnowledgeBase.open(tmp_path / "kb").manifest


def test_a_fitted_weight_is_not_used_once_the_vectors_changed(noise_kb, tmp_path):
    import shutil

    kb, topics, qrels = noise_kb
    shutil.copytree(kb.path, tmp_path / "kb")
    copy = KnowledgeBase.open(tmp_path / "kb")
    fit = fit_fusion(copy, load("trec", topics, qrels).half(1), Settings())
    record_fusion(copy.path, {**fit, "model_id": "another-encoder"})
    how = pipeline("hybrid", KnowledgeBase.open(tmp_path / "kb"), Settings(), 5).run(first_request(topics)).explain["q"]["fusion"]
    assert how["weighed by"] == "request" and "model_id changed" in how["note"]


def test_embedding_a_kb_whose_fit_was_made_on_other_vectors_says_to_fit_again(noise_kb, tmp_path):
    import shutil

    kb, topics, qrels = noise_kb
    shutil.copytree(kb.path, tmp_path / "kb")
    assert CliRunner().invoke(cli, ["kb", "embed", "--kb", str(tmp_path / "kb")]).exit_code == 0
    copy = KnowledgeBase.open(tmp_path / "kb")
    fit = fit_fusion(copy, load("trec", topics, qrels).half(1), Settings())
    record_fusion(copy.path, fit)
    embedded = CliRunner().invoke(cli, ["kb", "embed", "--kb", str(tmp_path / "kb")])
    assert embedded.exit_code == 0 and "note:" not in embedded.stderr  # fitted on these vectors: nothing to say
    record_fusion(copy.path, {**fit, "model_id": "another-encoder"})  # as if fitted before the vectors changed
    embedded = CliRunner().invoke(cli, ["kb", "embed", "--kb", str(tmp_path / "kb")])
    assert embedded.exit_code == 0
    assert "model_id changed since `kqe-rdf kb tune-fusion`; run it again" in embedded.stderr


def test_halves_split_a_query_set_the_same_way_every_time(noise_kb):
    _kb, topics, qrels = noise_kb
    whole = load("trec", topics, qrels)
    first, second = whole.half(1), whole.half(2)
    assert {q.qid for q in first} | {q.qid for q in second} == {q.qid for q in whole}
    assert not {q.qid for q in first} & {q.qid for q in second}
    assert min(len(first), len(second)) > len(whole) / 4
    assert [q.qid for q in load("trec", topics, qrels).half(1)] == [q.qid for q in first]


def test_tune_fusion_refuses_a_kb_without_vectors_and_an_unknown_measure(tmp_path, products_file, kb):
    build_kb(JsonlImporter([products_file]), tmp_path / "plain")
    topics, qrels = tmp_path / "t.tsv", tmp_path / "q.txt"
    topics.write_text("1\ttripod\n")
    qrels.write_text("1 0 B007 1\n")
    out = CliRunner().invoke(cli, ["kb", "tune-fusion", "trec", str(topics), str(qrels), "--kb", str(tmp_path / "plain")])
    assert out.exit_code == 2 and "has no dense index" in out.output
    out = CliRunner().invoke(cli, ["kb", "tune-fusion", "trec", str(topics), str(qrels), "--kb", str(kb.path),
                                   "--measure", "P@3"])
    assert out.exit_code == 2 and "choose one of Hit@1" in out.output
