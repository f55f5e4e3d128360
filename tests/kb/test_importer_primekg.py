"""The `primekg` importer: PrimeKG's kg.csv and feature CSVs → the KB STaRK-Prime is made from.

The test writes a small sample in exactly PrimeKG's published format (every edge in
both directions, quoted names with commas, grouped diseases with several feature
rows), builds a real KB from it and runs ``kqe-rdf eval stark`` on a QA file in
STaRK's format, whose answer ids are PrimeKG node indices.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kqe_rdf.kb.build import build_kb
from kqe_rdf.cli import cli
from kqe_rdf.core.errors import InputError, KqeError
from kqe_rdf.kb.importers import get_importer
from kqe_rdf.kb.knowledge_base import KnowledgeBase
from kqe_rdf.kb.records import Edge, ImportReport, Node

KG_HEADER = "relation,display_relation,x_index,x_id,x_type,x_name,x_source,y_index,y_id,y_type,y_name,y_source"
PHYHIP = "0,9796,gene/protein,PHYHIP,NCBI"
KIF15 = "8889,56992,gene/protein,KIF15,NCBI"
COPPER = "14012,DB09130,drug,Copper,DrugBank"
OXYGEN = "14013,DB09140,drug,Oxygen,DrugBank"
MULLERIAN = "27165,8019,disease,mullerian aplasia and hyperandrogenism,MONDO"
GROUPED = '27166,13924_12592,disease,"myelodysplasia, immunodeficiency and facial dysmorphism",MONDO_grouped'
SEIZURE = "22545,1250,effect/phenotype,Seizure,HPO"
LIVER = "62000,107,anatomy,liver,UBERON"
EDGES = [  # (relation, display_relation, x, y): each written in both directions, as kg.csv has them
    ("protein_protein", "ppi", PHYHIP, KIF15),
    ("drug_protein", "target", COPPER, PHYHIP),
    ("drug_protein", "enzyme", OXYGEN, KIF15),
    ("indication", "indication", COPPER, MULLERIAN),
    ("contraindication", "contraindication", OXYGEN, GROUPED),
    ("disease_protein", "associated with", PHYHIP, MULLERIAN),
    ("disease_phenotype_positive", "phenotype present", GROUPED, SEIZURE),
    ("disease_disease", "parent-child", MULLERIAN, GROUPED),
    ("anatomy_protein_present", "expression present", LIVER, KIF15),
]
KG_CSV = "\n".join([KG_HEADER] + [line for rel, display, x, y in EDGES
                                  for line in (f"{rel},{display},{x},{y}", f"{rel},{display},{y},{x}")]) + "\n"

DISEASE_HEADER = ("node_index,mondo_id,mondo_name,group_id_bert,group_name_bert,mondo_definition,umls_description,"
                  "orphanet_definition,orphanet_prevalence,orphanet_epidemiology,orphanet_clinical_description,"
                  "orphanet_management_and_treatment,mayo_symptoms,mayo_causes,mayo_risk_factors,mayo_complications,"
                  "mayo_prevention,mayo_see_doc")
DISEASE_CSV = DISEASE_HEADER + "\n" + "\n".join([
    "27165,8019,mullerian aplasia and hyperandrogenism,,,Deficiency of the glycoprotein WNT4 in females,,,,,,,,,,,,",
    # a grouped disease: one row per member, the group's text repeated; a quoted cell spans two lines
    '27166,13924,myelodysplasia immunodeficiency facial dysmorphism,13924_12592,myelodysplasia group,'
    '"A syndrome with myelodysplasia,\nimmunodeficiency and a characteristic face.",,,,,,,Recurrent infections,,,,,',
    '27166,12592,myelodysplasia with short stature,13924_12592,myelodysplasia group,'
    '"A syndrome with myelodysplasia,\nimmunodeficiency and a characteristic face.",,,,,,,Recurrent infections,,,,,',
]) + "\n"
DRUG_HEADER = ("node_index,description,half_life,indication,mechanism_of_action,protein_binding,pharmacodynamics,state,"
               "atc_1,atc_2,atc_3,atc_4,category,group,pathway,molecular_weight,tpsa,clogp")
DRUG_CSV = DRUG_HEADER + "\n" + "\n".join([
    "14012,Copper is a transition metal given in parenteral nutrition.,,For parenteral nutrition supplement.,,,,"
    "Copper is a solid.,,,,,,Copper is approved.,,,,",
    "14013,Oxygen is an element used in oxygen therapy.,,Oxygen therapy.,,,,Oxygen is a gas.,,,,,,,,,,",
]) + "\n"


@pytest.fixture
def primekg_dir(tmp_path):
    folder = tmp_path / "primekg"
    folder.mkdir()
    for name, text in {"kg.csv": KG_CSV, "disease_features.csv": DISEASE_CSV, "drug_features.csv": DRUG_CSV}.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def records(folder, **options):
    report = ImportReport()
    out = list(get_importer("primekg")([folder], **options).records(report))
    return {r.id: r for r in out if isinstance(r, Node)}, [r for r in out if isinstance(r, Edge)], report


def test_nodes_are_primekg_indices_typed_named_and_with_feature_text(primekg_dir):
    nodes, edges, report = records(primekg_dir)
    assert len(nodes) == 8
    assert (nodes["0"].type, nodes["0"].name, nodes["0"].xrefs) == ("GeneProtein", "PHYHIP", ("NCBI:9796",))
    assert (nodes["62000"].type, nodes["22545"].type) == ("Anatomy", "EffectPhenotype")
    grouped = nodes["27166"]
    assert grouped.name == "myelodysplasia, immunodeficiency and facial dysmorphism"  # quoted comma kept
    assert grouped.xrefs == ("MONDO_grouped:13924_12592",)
    # two member rows: both names become aliases, the repeated text is kept once
    assert grouped.aliases == ("myelodysplasia immunodeficiency facial dysmorphism", "myelodysplasia with short stature")
    assert dict(grouped.fields)["definition"] == "A syndrome with myelodysplasia,\nimmunodeficiency and a characteristic face."
    assert [f for f, _ in grouped.fields].count("definition") == 1
    assert dict(grouped.fields)["mayoSymptoms"] == "Recurrent infections"
    assert dict(grouped.fields)["diseaseGroup"] == "myelodysplasia group"
    copper = dict(nodes["14012"].fields)
    assert copper["description"] == "Copper is a transition metal given in parenteral nutrition."
    assert copper["indicationText"] == "For parenteral nutrition supplement." and copper["drugGroup"] == "Copper is approved."
    assert not report.warnings


def test_each_edge_is_stored_once_in_the_ontologys_direction(primekg_dir):
    _, edges, _ = records(primekg_dir)
    stored = [(e.head, e.relation, e.tail) for e in edges]
    assert len(stored) == len(EDGES)  # kg.csv lists 18 rows, two per edge
    # drug_protein is four relations, told apart by display_relation
    assert ("14012", "target", "0") in stored and ("14013", "enzyme", "8889") in stored
    # disease_protein rows run gene -> disease first; the ontology's domain (Disease) is the head
    assert ("27165", "diseaseProtein", "0") in stored
    assert ("62000", "expressionPresent", "8889") in stored
    # within one type the first direction seen is kept
    assert ("0", "ppi", "8889") in stored and ("27165", "diseaseParentChild", "27166") in stored


def test_built_kb_answers_stark_queries_by_node_index(primekg_dir, tmp_path, monkeypatch):
    kb_path = tmp_path / "kb"
    manifest = build_kb(get_importer("primekg")([primekg_dir]), kb_path)
    assert (manifest["counts"]["nodes"], manifest["counts"]["edges"]) == (8, len(EDGES))
    assert manifest["dataset"]["source"].startswith("Harvard Dataverse, doi:10.7910/DVN/IXA7BM")
    kb = KnowledgeBase.open(kb_path)
    # a document reads edges from both ends in PrimeKG's relation words
    text = kb.document("https://w3id.org/kqe/primekg/node/27165").text
    assert "indication" in text and "Copper" in text and "WNT4" in text

    qa = tmp_path / "stark_qa.csv"
    qa.write_text('id,query,answer_ids\n'
                  '0,Which drug is a transition metal given in parenteral nutrition?,[14012]\n'
                  '1,"What gas is used in oxygen therapy, and is metabolised by the enzyme KIF15?",[14013]\n'
                  # 9796 is PHYHIP's NCBI Gene id but no node's index: gold ids are indices only
                  '2,Which protein interacts with KIF15?,[9796]\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["eval", "stark", str(qa), "--kb", str(kb_path), "-m", "bm25",
                                      "--type", "Drug", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["queries"], out["answerable"], out["gold_ids_not_in_kb"]) == (3, 2, 1)
    assert out["results"][0]["Hit@1"] == round(2 / 3, 4)  # both answerable queries are answered first


@pytest.mark.parametrize("line, message", [
    ("protein_protein,ppi,0,9796,gene/protein,PHYHIP,NCBI,8889,56992", "expected 12 cells"),
    ("protein_protein,ppi,0,9796,gene,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI", "unknown node type 'gene'"),
    ("protein_protein,binds,0,9796,gene/protein,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI",
     "unknown relation 'protein_protein' with display_relation 'binds'"),
    ("protein_protein,ppi,x0,9796,gene/protein,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI", "node index 'x0'"),
    ("protein_protein,ppi,0,9796,drug,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI", "node 0 is a drug here"),
    ("indication,indication,0,9796,gene/protein,PHYHIP,NCBI,8889,56992,gene/protein,KIF15,NCBI",
     "joins Drug and Disease in primekg.ttl, not gene/protein and gene/protein"),
    ('protein_protein,ppi,0,9796,gene/protein,"PHYHIP,NCBI,8889', "expected 12 cells"),
])
def test_bad_rows_name_file_and_line(primekg_dir, line, message):
    kg = primekg_dir / "kg.csv"
    kg.write_text(KG_CSV + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message) as info:
        records(primekg_dir)
    assert info.value.where == f"{kg}:{KG_CSV.count(chr(10)) + 1}"


def test_feature_files_are_checked_too(primekg_dir):
    drugs = primekg_dir / "drug_features.csv"
    drugs.write_text(DRUG_HEADER + "\nDB09130,Copper.,,,,,,,,,,,,,,,,\n", encoding="utf-8")
    with pytest.raises(InputError, match="node index 'DB09130'") as info:
        records(primekg_dir)
    assert info.value.where == f"{drugs}:2"
    drugs.write_text("description\nCopper.\n", encoding="utf-8")
    with pytest.raises(InputError, match="lacks the column.s. node_index"):
        records(primekg_dir)


def test_sources_and_limit(primekg_dir, tmp_path):
    with pytest.raises(KqeError, match="no kg.csv in .*doi:10.7910/DVN/IXA7BM"):
        get_importer("primekg")([tmp_path]).dataset_info()
    with pytest.raises(KqeError, match="needs PrimeKG's kg.csv"):
        get_importer("primekg")([]).dataset_info()
    # files named one by one; without feature files the nodes have names only, and the report says so
    nodes, _, report = records(primekg_dir / "kg.csv")
    assert len(nodes) == 8 and not nodes["14012"].fields
    assert any("nodes get names but no text" in w for w in report.warnings)
    # a limit keeps the first nodes and the edges between them
    nodes, edges, _ = records(primekg_dir, limit=3)
    assert set(nodes) == {"0", "8889", "14012"}
    assert {(e.head, e.relation, e.tail) for e in edges} == {("0", "ppi", "8889"), ("14012", "target", "0")}
