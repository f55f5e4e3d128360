"""The names the reader links a phrase to by meaning ("tall man" → Tall stature) are encoded with the KB (issue 67,
item 1: the first request on a freshly built bio KB spent two minutes of CPU encoding HPO's 19,034 phenotype names)."""

from __future__ import annotations

import logging

import numpy as np
from click.testing import CliRunner

from kqe_rdf.cli import cli
from kqe_rdf.core.config import Settings
from kqe_rdf.kb.build import build_kb
from kqe_rdf.kb.importers.bio import BioImporter
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.linking import Linker
from kqe_rdf.kb.phrases import TERMS, term_name_vectors
from support.fixtures_kb import write_hpo

PHENOTYPE = "https://w3id.org/kqe/bio#Phenotype"


def built(tmp_path, **settings) -> KnowledgeBase:
    build_kb(BioImporter([write_hpo(tmp_path / "source")], doid="none"), tmp_path / "kb", Settings(**settings))
    return KnowledgeBase.open(tmp_path / "kb")


def phenotypes(kb: KnowledgeBase) -> tuple[list[str], list[str]]:
    """The phenotypes and their names as the linker lists them for links by meaning."""
    linker = Linker(kb)
    iris = [iri for iri in kb.names.iris if PHENOTYPE in kb.names.types.get(iri, ())]
    return iris, [linker._name(iri) for iri in iris]


def test_a_first_request_reads_the_names_vectors_the_build_made(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path / "cache"))  # nothing kept on this machine from before
    kb = built(tmp_path)
    assert (kb.path / TERMS).is_file() and "term_names" in kb.manifest["seconds"]
    iris, names = phenotypes(kb)
    with caplog.at_level(logging.WARNING):
        vectors = term_name_vectors(kb, iris, names, PHENOTYPE)
    assert "encoding the names" not in caplog.text
    assert not list((tmp_path / "cache").glob("terms-*"))
    # what the request would have encoded itself: its links are the same
    assert np.array_equal(vectors, kb.encoder.encode(names).astype(np.float16))


def test_a_class_whose_nodes_changed_since_is_encoded_at_request_time(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path / "cache"))
    kb = built(tmp_path)
    iris, names = phenotypes(kb)
    with caplog.at_level(logging.WARNING):
        vectors = term_name_vectors(kb, iris[1:], names[1:], PHENOTYPE)
    assert "encoding the names" in caplog.text and len(vectors) == len(iris) - 1


def test_with_the_setting_off_the_build_encodes_none_and_a_request_still_links_by_meaning(tmp_path, monkeypatch,
                                                                                         caplog):
    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path / "cache"))
    kb = built(tmp_path, embedding_term_names=False)
    assert not (kb.path / TERMS).exists() and "term_names" not in kb.manifest["seconds"]
    iris, names = phenotypes(kb)
    with caplog.at_level(logging.WARNING):
        assert len(term_name_vectors(kb, iris, names, PHENOTYPE)) == len(iris)
    assert "encoding the names" in caplog.text


def test_kb_build_says_it_encoded_the_names(tmp_path, monkeypatch):
    monkeypatch.setenv("KQE_CACHE_DIR", str(tmp_path / "cache"))
    source = write_hpo(tmp_path / "source")
    run = CliRunner().invoke(cli, ["kb", "build", "bio", str(source), "--option", "doid=none",
                                   "--kb", str(tmp_path / "kb")])
    assert run.exit_code == 0, run.output
    assert "term name vectors (" in run.output, run.output
