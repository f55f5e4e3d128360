"""Evaluation query sets: each loader on a tiny inline fixture, on the real shared file, and on bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kqe_rdf.core.errors import InputError
from kqe_rdf.evaluation.metrics import stark_metrics
from kqe_rdf.evaluation.querysets import (
    LOADERS,
    MAX_EXCLUDED,
    NEGATED_WORDINGS,
    WORDINGS,
    EvalQuery,
    load,
    load_metaqa,
    load_phenopackets,
    load_scifact,
    load_stark,
    load_trec,
)
from support.paths import SHARED_DATA

DATA = SHARED_DATA
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA}")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_every_loader_is_registered_by_name_with_a_one_line_docstring() -> None:
    assert set(LOADERS) == {"stark", "trec", "metaqa", "irn", "phenopackets", "scifact"}
    for loader in LOADERS.values():
        assert loader.__doc__ and "\n" not in loader.__doc__.strip()
    with pytest.raises(InputError, match="no query set loader named 'nope'; available: irn, metaqa"):
        load("nope")


# ---------------------------------------------------------------- STaRK

STARK_CSV = '''\
id,query,answer_ids,answer_ids_source
7,"Looking for a card box, holds 1000 cards","[101, 102]",[101]
8,A grip enhancer with natural ingredients,[205],[205]
9,Nothing fits this one,[],[]
'''


def test_stark_csv_gives_queries_with_string_node_ids(tmp_path: Path) -> None:
    queries = load_stark(write(tmp_path / "stark_qa.csv", STARK_CSV))
    assert list(queries)[0] == EvalQuery("7", "Looking for a card box, holds 1000 cards", {"101": 1, "102": 1})
    assert len(queries) == 2 and queries.skipped == {"no answers": 1}
    assert stark_metrics({"7": {"102": 0.3}, "8": {"999": 0.9}}, queries.qrels())["Hit@1"] == 0.5


def test_stark_split_index_selects_queries(tmp_path: Path) -> None:
    split = write(tmp_path / "split" / "val.index", "8\n42\n")
    queries = load_stark(write(tmp_path / "stark_qa.csv", STARK_CSV), split_index=split)
    assert [q.qid for q in queries] == ["8"]
    assert queries.skipped == {"not in split": 2, "split ids not in the CSV": 1}
    assert len(load("stark", tmp_path / "stark_qa.csv", limit=1)) == 1


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('10,A query,"[1, 2",[1]\n', r"stark_qa.csv:3: answer_ids '\[1, 2' is not a list literal"),
        ('10,A query,"[1]",[1],extra\n', r"stark_qa.csv:3: expected 4 columns .* found 5"),
        ("10,A query\n", r"stark_qa.csv:3: expected 4 columns .* found 2"),
    ],
)
def test_bad_stark_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    header, first_row = STARK_CSV.splitlines(keepends=True)[:2]
    path = write(tmp_path / "stark_qa.csv", header + first_row + row)
    with pytest.raises(InputError, match=message):
        load_stark(path)


def test_stark_csv_without_the_needed_columns_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"bad.csv:1: CSV header lacks column\(s\) answer_ids"):
        load_stark(write(tmp_path / "bad.csv", "id,query\n1,q\n"))


@needs_data
def test_stark_real_files() -> None:
    amazon = DATA / "stark" / "amazon"
    human = load_stark(amazon / "stark_qa" / "stark_qa_human_generated_eval.csv")
    assert len(human) == 81 and not human.skipped
    val = load_stark(amazon / "stark_qa" / "stark_qa.csv", split_index=amazon / "split" / "val.index")
    assert len(val) == 1548 and "split ids not in the CSV" not in val.skipped


# ---------------------------------------------------------------- TREC


def test_trec_topics_with_graded_qrels(tmp_path: Path) -> None:
    topics = write(tmp_path / "topics.tsv", "19335\tanthropological definition of environment\n47923\tsmall cars\n")
    qrels = write(tmp_path / "qrels.txt", "19335 Q0 1017759 0\n19335 Q0 1082489 3\n99 Q0 5 1\n")
    queries = load_trec(topics, qrels)
    assert list(queries) == [
        EvalQuery("19335", "anthropological definition of environment", {"1017759": 0, "1082489": 3})
    ]
    assert queries.skipped == {"no judgments": 1, "judged qids without a topic": 1}


def test_trec_topic_line_without_a_tab_is_an_input_error(tmp_path: Path) -> None:
    topics = write(tmp_path / "topics.tsv", "1\tok\n2 no tab here\n")
    with pytest.raises(InputError, match=r"topics.tsv:2: expected 'qid<TAB>query text'"):
        load_trec(topics, write(tmp_path / "qrels.txt", "1 0 d 1\n"))


@needs_data
def test_trec_dl19_real_files() -> None:
    folder = DATA / "trec_dl19"
    queries = load_trec(folder / "topics.dl19-passage.txt", folder / "qrels.dl19-passage.txt")
    assert len(queries) == 43 and not queries.skipped


# ---------------------------------------------------------------- MetaQA


def test_metaqa_removes_the_topic_marks_but_keeps_the_topic(tmp_path: Path) -> None:
    path = write(
        tmp_path / "2-hop" / "dev.txt.gz",
        "what movies did [Temuera Morrison] act in\tOnce Were Warriors|Tracker\nwho wrote [Heat]\t\n",
    )
    queries = load_metaqa(path)
    assert list(queries) == [
        EvalQuery(
            "2-hop-1",
            "what movies did Temuera Morrison act in",
            {"Once Were Warriors": 1, "Tracker": 1},
            topic="Temuera Morrison",
            facets={"hops": "2-hop", "template": "what movies did E act in"},
        )
    ]
    assert queries.skipped == {"no answers": 1}
    plain = load_metaqa(write(tmp_path / "questions.txt", "who directed [Heat]\tMichael Mann\n"))
    assert [(q.qid, q.text, q.topic, q.facets) for q in plain] == [
        ("1", "who directed Heat", "Heat", {"template": "who directed E"})]


def test_metaqa_files_of_several_hops_make_one_set(tmp_path: Path) -> None:
    one = write(tmp_path / "1-hop" / "dev.txt", "who directed [Heat]\tMichael Mann\n")
    two = write(tmp_path / "2-hop" / "dev.txt", "who starred in films by [Michael Mann]\tAl Pacino\n")
    queries = load_metaqa(one, two)
    assert queries.name == "metaqa 1-hop + 2-hop"
    assert [(q.qid, q.facets["hops"]) for q in queries] == [("1-hop-1", "1-hop"), ("2-hop-1", "2-hop")]
    assert [q.qid for q in load_metaqa(one, two, limit=1)] == ["1-hop-1"]


def test_metaqa_line_without_answers_column_is_an_input_error(tmp_path: Path) -> None:
    path = write(tmp_path / "dev.txt", "who directed [Heat]\tMichael Mann\nwho directed [Ran]\n")
    with pytest.raises(InputError, match=r"dev.txt:2: expected 'question with \[topic entity\]<TAB>"):
        load_metaqa(path)


@needs_data
def test_metaqa_real_1hop_dev() -> None:
    queries = load_metaqa(DATA / "metaqa" / "1-hop" / "dev.txt.gz")
    assert len(queries) == 9992
    assert queries.queries[0].qid == "1-hop-1" and "[" not in queries.queries[0].text
    assert len(load_metaqa(DATA / "metaqa" / "1-hop" / "dev.txt.gz", limit=5)) == 5


# ---------------------------------------------------------------- phenopackets

CASE = {
    "id": "PMID_1_1",
    "observed": [["HP:0000348", "High forehead"], ["HP:0001250", "Seizure"], ["HP:0002360", "EEG abnormality"]],
    "excluded": [["HP:0000316", "Hypertelorism"], ["HP:0000518", "Cataract"]],
    "diseases": [["OMIM:147791", "Jacobsen syndrome"], ["ORPHA:2308", "Jacobsen syndrome"]],
    "genes": [],
    "sex": "FEMALE",
}


def cases(tmp_path: Path, *records: dict) -> Path:
    return write(tmp_path / "cases.jsonl.gz", "".join(json.dumps(r) + "\n" for r in records))


def test_phenopacket_cases_become_one_fixed_question_template(tmp_path: Path) -> None:
    male = {**CASE, "id": "PMID_1_2", "sex": "MALE", "excluded": [["HP:0000518", "Cataract"]]}
    unknown = {**CASE, "id": "PMID_1_3", "sex": "UNKNOWN_SEX", "excluded": []}
    queries = load_phenopackets(cases(tmp_path, CASE, male, unknown))
    assert [q.text for q in queries] == [
        "A female patient presents with high forehead, seizure and EEG abnormality. "
        "Hypertelorism and cataract were not observed. Which disease explains this?",
        "A male patient presents with high forehead, seizure and EEG abnormality. "
        "Cataract was not observed. Which disease explains this?",
        "A patient presents with high forehead, seizure and EEG abnormality. Which disease explains this?",
    ]
    assert queries.queries[0].answers == {"OMIM:147791": 1, "ORPHA:2308": 1}
    assert [q.facets for q in queries] == [{"observed terms": "1-4"}] * 3  # what a report breaks scores down by


def test_phenopacket_cases_in_the_wordings_a_user_types_list_the_observed_phenotypes_only(tmp_path: Path) -> None:
    worded = {w: load_phenopackets(cases(tmp_path, CASE), wording=w) for w in WORDINGS}
    assert {w: qs.queries[0].text for w, qs in worded.items() if w in ("list", "which", "child")} == {
        "list": "high forehead, seizure and EEG abnormality",
        "which": "which disease causes high forehead, seizure and EEG abnormality?",
        "child": "child with high forehead, seizure and EEG abnormality",
    }
    assert worded["list"].name == "phenopackets disease, wording 'list'" and worded["template"].name == "phenopackets disease"
    assert all(qs.queries[0].answers == {"OMIM:147791": 1, "ORPHA:2308": 1} for qs in worded.values())
    with pytest.raises(InputError, match="unknown wording 'prose'; one of template, list, which, child, semicolon"):
        load_phenopackets(cases(tmp_path, CASE), wording="prose")


def test_phenopacket_cases_in_the_negation_wordings_say_the_excluded_phenotypes_in_the_same_line(tmp_path: Path):
    worded = {w: load_phenopackets(cases(tmp_path, CASE), wording=w).queries[0].text for w in NEGATED_WORDINGS}
    observed = "high forehead, seizure and EEG abnormality"
    assert worded == {
        "semicolon": f"{observed}; no hypertelorism or cataract",
        "but": f"{observed} but no hypertelorism or cataract",
        "without": f"{observed}, without hypertelorism or cataract",
        "denies": f"{observed}; denies hypertelorism or cataract",
        "negative": f"{observed}, negative for hypertelorism and cataract",
        "ruled": f"{observed}; hypertelorism and cataract ruled out",
        "first": f"no hypertelorism or cataract, but has {observed}",
    }
    # a case that excludes nothing is the plain list in every such wording
    bare = load_phenopackets(cases(tmp_path, {**CASE, "excluded": []}), wording="semicolon").queries[0].text
    assert bare == observed


def test_eval_offers_every_wording_for_phenopackets_only() -> None:
    from click.testing import CliRunner

    from kqe_rdf.cli import cli, eval_command

    choices = next(p for p in eval_command.params if p.name == "wording").type.choices
    assert tuple(choices) == WORDINGS
    refused = CliRunner().invoke(cli, ["eval", "metaqa", __file__, "--wording", "list"])
    assert refused.exit_code == 2 and "applies to phenopackets only" in refused.output


def test_phenopacket_excluded_terms_are_capped(tmp_path: Path) -> None:
    many = {**CASE, "excluded": [[f"HP:{i:07d}", f"Term {i}"] for i in range(MAX_EXCLUDED + 5)]}
    text = load_phenopackets(cases(tmp_path, many)).queries[0].text
    assert f"term {MAX_EXCLUDED - 1} were not observed" in text and f"term {MAX_EXCLUDED}" not in text


def test_phenopacket_gene_target_skips_and_counts_cases_without_genes(tmp_path: Path) -> None:
    with_gene = {**CASE, "id": "PMID_2_1", "genes": [["HGNC:48", "ABCB7"]]}
    queries = load_phenopackets(cases(tmp_path, CASE, with_gene), target="gene")
    assert [(q.qid, q.answers) for q in queries] == [("PMID_2_1", {"ABCB7": 1})]
    assert queries.queries[0].text.endswith("Which gene explains this?")
    assert queries.skipped == {"no gene": 1}
    with pytest.raises(InputError, match="target must be 'disease' or 'gene'"):
        load_phenopackets(cases(tmp_path, CASE), target="variant")


def test_bad_phenopacket_json_line_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "cases.jsonl", json.dumps(CASE) + "\n" + '{"id": "PMID_9", "observed": [\n')
    with pytest.raises(InputError, match=r"cases.jsonl:2: not valid JSON"):
        load_phenopackets(path)
    path = write(tmp_path / "cases.jsonl", json.dumps({**CASE, "observed": [["HP:1"]]}) + "\n")
    with pytest.raises(InputError, match=r"cases.jsonl:1: phenotype \['HP:1'\] is not an \[id, label\] pair"):
        load_phenopackets(path)


@needs_data
def test_phenopackets_real_dev_split() -> None:
    path = DATA / "phenopackets" / "dev.jsonl.gz"
    diseases = load_phenopackets(path)
    assert len(diseases) == 2194 and not diseases.skipped
    assert diseases.queries[0].answers == {"OMIM:147791": 1}
    genes = load_phenopackets(path, target="gene")
    assert len(genes) + genes.skipped["no gene"] == 2194


# ---------------------------------------------------------------- SciFact


def test_scifact_claims_take_answers_from_qrels(tmp_path: Path) -> None:
    claims = write(
        tmp_path / "claims.csv",
        "id,claim,evidence_doc_id,evidence_label,evidence_sentences,cited_doc_ids\n"
        "0,0-dimensional biomaterials lack inductive properties.,,,[],[31715818]\n"
        "2,1 in 5 million in UK have abnormal PrP positivity.,13734012,CONTRADICT,[4],[13734012]\n"
        "2,1 in 5 million in UK have abnormal PrP positivity.,13734012,CONTRADICT,[5],[13734012]\n"
        "4,A claim nobody judged.,,,[],[]\n",
    )
    qrels = write(tmp_path / "qrels.txt", "0 0 31715818 1\n2 0 13734012 1\n")
    queries = load_scifact(claims, qrels)
    assert [(q.qid, q.answers) for q in queries] == [("0", {"31715818": 1}), ("2", {"13734012": 1})]
    assert queries.skipped == {"no qrels": 1}


def test_scifact_bad_csv_row_names_the_line(tmp_path: Path) -> None:
    claims = write(tmp_path / "claims.csv", "id,claim,cited_doc_ids\n0,A claim,[1]\n1,Another claim\n")
    with pytest.raises(InputError, match=r"claims.csv:3: expected 3 columns"):
        load_scifact(claims, write(tmp_path / "qrels.txt", "0 0 1 1\n"))


@needs_data
def test_scifact_real_train_claims() -> None:
    folder = DATA / "scifact"
    queries = load_scifact(folder / "claims_train.csv", folder / "qrels_train.txt")
    assert len(queries) == 809 and not queries.skipped


def test_limit_stops_after_that_many_loaded_queries(tmp_path: Path) -> None:
    stark = write(tmp_path / "stark_qa.csv", STARK_CSV)
    assert [q.qid for q in load("stark", stark, limit=1)] == ["7"]
    assert len(load("stark", stark, limit=0)) == 0
    metaqa = write(tmp_path / "1-hop" / "dev.txt", "who directed [Heat]\tMichael Mann\nwho wrote [Ran]\tAkira Kurosawa\n")
    assert [q.qid for q in load("metaqa", metaqa, limit=1)] == ["1-hop-1"]
    assert [q.qid for q in load("phenopackets", cases(tmp_path, CASE, {**CASE, "id": "B"}), limit=1)] == ["PMID_1_1"]
