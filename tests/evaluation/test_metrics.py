"""Evaluation metrics: STaRK (Hit@k, Recall@k, MRR) and TREC (ir_measures), read like usage examples."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import ir_measures
import pytest

from kqe_rdf.core.errors import InputError
from kqe_rdf.evaluation.metrics import (
    Qrel,
    ScoredHit,
    per_query_stark,
    per_query_trec,
    read_trec_qrels,
    read_trec_run,
    stark_metrics,
    trec_metrics,
    write_trec_run,
)
from support.paths import SHARED_DATA

DATA = SHARED_DATA
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA}")

# q1: gold d1 and d3; ranked d2, d1, d3, d4.  q2: gold d9, ranked nowhere.
QRELS = """\
q1 0 d1 1
q1 0 d3 1
q1 0 d4 0
q2 0 d9 1
"""
RUN = """\
q1 Q0 d2 1 9.0 demo
q1 Q0 d1 2 7.5 demo
q1 Q0 d3 3 3.0 demo
q1 Q0 d4 4 1.0 demo
q2 Q0 d5 1 2.0 demo
"""


def test_trec_run_text_reads_into_zero_based_hits() -> None:
    hits = read_trec_run(RUN)
    assert hits[0] == ScoredHit("q1", "d2", 9.0, 0)
    assert read_trec_qrels(QRELS)[0] == Qrel("q1", "d1", 1)


def test_written_run_reads_back_with_one_based_ranks_in_the_file(tmp_path: Path) -> None:
    out = tmp_path / "run.txt"
    write_trec_run([ScoredHit("q1", "b", 0.5, 1), ScoredHit("q1", "a", 0.9, 0)], out, tag="kqe")
    assert out.read_text().splitlines() == ["q1 Q0 a 1 0.9 kqe", "q1 Q0 b 2 0.5 kqe"]
    assert read_trec_run(out) == [ScoredHit("q1", "a", 0.9, 0), ScoredHit("q1", "b", 0.5, 1)]


def test_stark_metrics_on_a_hand_checked_example() -> None:
    metrics = stark_metrics(read_trec_run(RUN), read_trec_qrels(QRELS), hit_ks=(1, 2), recall_ks=(2, 20))
    # q1: first gold at rank 2; q2: gold never retrieved, still averaged as 0.
    assert metrics == {"Hit@1": 0.0, "Hit@2": 0.5, "Recall@2": 0.25, "Recall@20": 0.5, "MRR": 0.25}
    assert per_query_stark(read_trec_run(RUN), read_trec_qrels(QRELS))["q1"] == {
        "Hit@1": 0.0, "Hit@5": 1.0, "Recall@20": 1.0, "MRR": 0.5,
    }


def test_dict_of_dict_runs_and_qrels_give_the_same_metrics() -> None:
    run = {"q1": {"d2": 9.0, "d1": 7.5, "d3": 3.0, "d4": 1.0}, "q2": {"d5": 2.0}}
    qrels = {"q1": {"d1": 1, "d3": 1, "d4": 0}, "q2": {"d9": 1}}
    assert stark_metrics(run, qrels) == stark_metrics(read_trec_run(RUN), read_trec_qrels(QRELS))


def test_queries_missing_from_the_run_count_as_zero_and_unjudged_ones_are_not_averaged() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 0}}
    assert stark_metrics({"q1": {"d1": 1.0}}, qrels)["MRR"] == 0.5
    assert set(per_query_stark({}, qrels)) == {"q1", "q2"}


def test_negative_or_equal_scores_rank_like_distinct_positive_ones() -> None:
    """Only the order matters: sign and ties (broken by the given rank, then doc_id) never do."""
    positive = read_trec_run(RUN)
    negative = [h._replace(score=h.score - 100.0) for h in positive]
    equal = [h._replace(score=0.0) for h in positive]
    zero_and_negative = [h._replace(score=-float(h.rank)) for h in positive]
    expected = stark_metrics(positive, read_trec_qrels(QRELS))
    for run in (negative, equal, zero_and_negative):
        assert stark_metrics(run, read_trec_qrels(QRELS)) == expected
    # With equal scores and equal ranks the doc_id decides, the same way every time.
    tied = [ScoredHit("q1", "d3", 1.0, 0), ScoredHit("q1", "d1", 1.0, 0)]
    assert per_query_stark(tied, {"q1": {"d1": 1}})["q1"]["MRR"] == 1.0


def test_ir_measures_agrees_with_stark_recall_at_20() -> None:
    qrels = {"q1": {f"d{i}": 1 for i in (0, 3, 19, 20, 40)}, "q2": {"d5": 1, "d7": 1}}
    run = {"q1": {f"d{i}": 50.0 - i for i in range(50)}, "q2": {f"d{i}": 1.0 / (i + 1) for i in range(30)}}
    ours = stark_metrics(run, qrels)["Recall@20"]
    theirs = ir_measures.calc_aggregate([ir_measures.R @ 20], qrels, run)[ir_measures.R @ 20]
    assert ours == pytest.approx(theirs) == pytest.approx((3 / 5 + 1) / 2)


def test_trec_metrics_take_a_relevance_threshold() -> None:
    qrels = {"q1": {"a": 1, "b": 2}}
    run = {"q1": {"a": 2.0, "b": 1.0}}
    assert trec_metrics(run, qrels, ("AP", "RR")) == {"AP": 1.0, "RR": 1.0}
    assert trec_metrics(run, qrels, ("AP", "RR"), rel=2) == {"AP(rel=2)": 0.5, "RR(rel=2)": 0.5}
    assert trec_metrics(run, qrels, ("AP(rel=1)",), rel=2) == {"AP": 1.0}  # a threshold in the name wins
    assert per_query_trec(run, qrels, ("RR",), rel=2) == {"q1": {"RR(rel=2)": 0.5}}


def test_trec_ties_follow_trec_eval_unless_the_given_order_is_asked_for() -> None:
    """trec_eval ignores ranks and breaks score ties by doc_id descending: "b" before "a"."""
    run = [ScoredHit("q1", "a", 1.0, 0), ScoredHit("q1", "b", 1.0, 1)]
    qrels = {"q1": {"a": 1}}
    assert trec_metrics(run, qrels, ("RR",)) == {"RR": 0.5}
    assert trec_metrics(run, qrels, ("RR",), use_given_order=True) == {"RR": 1.0}
    assert stark_metrics(run, qrels)["MRR"] == 1.0


def test_a_run_line_with_four_columns_names_the_line() -> None:
    with pytest.raises(InputError, match=r"<text>:2: expected 6 columns"):
        read_trec_run("q1 Q0 d1 1 0.5 t\nq1 Q0 d2 1\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q1 Q0 d1 1 high t\n", r"<text>:1: .*score 'high'"),
        ("q1 Q0 d1 1 nan t\n", r"<text>:1: .*not a finite number"),
        ("q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n", r"<text>:2: document 'd1' listed twice"),
    ],
)
def test_malformed_runs_are_input_errors(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        read_trec_run(text)


def test_malformed_qrels_missing_files_and_unknown_measures_are_input_errors(tmp_path: Path) -> None:
    bad = tmp_path / "qrels.txt"
    bad.write_text("q1 0 d1 1\nq1 d2 1\n")
    with pytest.raises(InputError, match=rf"{bad}:2: expected 4 columns"):
        read_trec_qrels(bad)
    with pytest.raises(InputError, match="relevance 'yes'"):
        read_trec_qrels("q1 0 d1 yes\n")
    with pytest.raises(InputError, match="no such file"):
        read_trec_run(tmp_path / "absent.txt")
    with pytest.raises(InputError, match="unknown measure 'Bogus@3'"):
        trec_metrics({}, {"q1": {"a": 1}}, ("Bogus@3",))
    with pytest.raises(InputError, match="no query with a document of relevance"):
        stark_metrics({}, {"q1": {"a": 0}})


# ---------------------------------------------------------------- published numbers


@needs_data
def test_stark_metrics_reproduce_the_published_amazon_human_numbers() -> None:
    """ada-002 VSS on the 81 STaRK-Amazon human queries (avatar's eval_metrics_human_generated_eval.json)."""
    rankings = DATA / "stark" / "avatar_ada002_rankings" / "amazon"
    gold_csv = DATA / "stark" / "amazon" / "stark_qa" / "stark_qa_human_generated_eval.csv"
    with open(gold_csv, newline="", encoding="utf-8") as handle:
        qrels = {row["id"]: {str(a): 1 for a in ast.literal_eval(row["answer_ids"])} for row in csv.DictReader(handle)}
    run: list[ScoredHit] = []
    with open(rankings / "eval_results_human_generated_eval.csv", newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            # The file has ranks but no scores: all scores tie, the given rank orders them.
            ranked_ids = ast.literal_eval(row["pred_rank"])
            run += [ScoredHit(row["query_id"], str(doc), 0.0, rank) for rank, doc in enumerate(ranked_ids)]

    metrics = {name: 100 * value for name, value in stark_metrics(run, qrels).items()}

    assert len(qrels) == 81
    assert metrics["Hit@1"] == pytest.approx(39.51, abs=0.02)
    assert metrics["Hit@5"] == pytest.approx(64.20, abs=0.02)
    assert metrics["Recall@20"] == pytest.approx(35.46, abs=0.02)
    assert metrics["MRR"] == pytest.approx(52.65, abs=0.02)
    published = json.loads((rankings / "eval_metrics_human_generated_eval.json").read_text())
    assert metrics["Hit@1"] / 100 == pytest.approx(published["hit@1"], abs=1e-9)
    assert metrics["Recall@20"] / 100 == pytest.approx(published["recall@20"], abs=1e-6)


@needs_data
@pytest.mark.parametrize(("run_file", "ndcg10"), [("run.BM25.txt", 0.5058), ("run.BM25_RM3.txt", 0.5216)])
def test_trec_metrics_reproduce_the_published_dl19_passage_numbers(run_file: str, ndcg10: float) -> None:
    """Anserini's BM25 and BM25+RM3 runs on TREC DL 2019 passage (rel=2 for AP and recall, as TREC DL does)."""
    folder = DATA / "trec_dl19"
    qrels = read_trec_qrels(folder / "qrels.dl19-passage.txt")
    metrics = trec_metrics(read_trec_run(folder / run_file), qrels, ("nDCG@10", "AP", "R@100"), rel=2)
    assert set(metrics) == {"nDCG@10", "AP(rel=2)", "R(rel=2)@100"}
    assert metrics["nDCG@10"] == pytest.approx(ndcg10, abs=0.0005)
    assert len(per_query_trec(read_trec_run(folder / run_file), qrels, ("nDCG@10",))) == 43
