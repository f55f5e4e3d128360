"""Settings: defaults < TOML file < KQE_* environment < explicit options, with every bad value refused."""

from __future__ import annotations

from pathlib import Path

import pytest

import dataclasses

from kqe_rdf.core.config import DECLARED, FLAT, KARSettings, Settings
from kqe_rdf.core.errors import KqeError


@pytest.fixture(autouse=True)
def in_empty_dir(tmp_path, monkeypatch):
    """Settings.load reads ./kqe-rdf.toml; run every test where there is none unless the test writes one."""
    monkeypatch.chdir(tmp_path)


def toml(text: str, name: str = "kqe-rdf.toml") -> Path:
    path = Path(name)
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults():
    settings = Settings.load(env={})
    assert settings == Settings()
    assert (settings.k, settings.embedding.model, settings.on_unknown_edge) == (10, "minilm-int8", "skip")


def test_environment_variables_are_typed():
    settings = Settings.load(env={"KQE_K": "20", "KQE_PRF_ORIGINAL_WEIGHT": "0.3", "KQE_KB": "/data/kb/amazon",
                                  "KQE_ON_UNKNOWN_EDGE": "fail", "KQE_UNRELATED": "ignored"})
    assert settings.k == 20
    assert settings.prf.original_weight == 0.3
    assert settings.kb == Path("/data/kb/amazon")
    assert settings.on_unknown_edge == "fail"


def test_a_toml_file_in_the_working_directory_is_read():
    toml('[kqe-rdf]\nk = 5\nhybrid_depth = 50\nkb = "data/kb/metaqa"\n')
    settings = Settings.load(env={})
    assert (settings.k, settings.hybrid.depth, settings.kb) == (5, 50, Path("data/kb/metaqa"))


def test_a_toml_file_may_hold_settings_at_the_top_level():
    assert Settings.load(file=toml("rrf_k = 30\n", "flat.toml"), env={}).hybrid.rrf_k == 30


def test_kqe_config_names_the_file():
    path = toml("[kqe-rdf]\nprf_docs = 3\n", "elsewhere.toml")
    assert Settings.load(env={"KQE_CONFIG": str(path)}).prf.docs == 3


def test_environment_beats_file_and_options_beat_both():
    toml("[kqe-rdf]\nk = 5\nprf_terms = 7\nrrf_k = 30\n")
    settings = Settings.load(env={"KQE_K": "15", "KQE_PRF_TERMS": "8"}, k=25, rrf_k=None)
    assert (settings.k, settings.prf.terms, settings.hybrid.rrf_k) == (25, 8, 30)  # None means "not given"


@pytest.mark.parametrize("env, message", [
    ({"KQE_K": "ten"}, "setting k must be a int, got 'ten'"),
    ({"KQE_K": "2.5"}, "setting k must be a int, got '2.5'"),
    ({"KQE_PRF_ORIGINAL_WEIGHT": "half"}, "setting prf_original_weight must be a float"),
    ({"KQE_K": "0"}, "setting k must be at least 1, got 0"),
    ({"KQE_EMBEDDING_BATCH_SIZE": "-4"}, "setting embedding_batch_size must be at least 1"),
    ({"KQE_RRF_K": "-1"}, "setting rrf_k must not be negative"),
    ({"KQE_PRF_ORIGINAL_WEIGHT": "1.5"}, "setting prf_original_weight must be between 0 and 1"),
    ({"KQE_ON_UNKNOWN_EDGE": "sometimes"}, "setting on_unknown_edge must be 'skip' or 'fail', got 'sometimes'"),
    ({"KQE_FOURSTEP_NEGATED": "penalise"}, "setting fourstep_negated must be 'context', 'cost' or 'ignore'"),
])
def test_bad_environment_values_are_refused(env, message):
    with pytest.raises(KqeError, match=message.replace("(", r"\(")):
        Settings.load(env=env)


@pytest.mark.parametrize("text, message", [
    ("[kqe-rdf]\nk = 2.5\n", "setting k must be a int, got 2.5"),
    ("[kqe-rdf]\nk = true\n", "setting k must be a int, got True"),
    ("[kqe-rdf]\nembedding_model = 7\n", "setting embedding_model must be a str, got 7"),
    ('[kqe-rdf]\nk = "many"\n', "setting k must be a int, got 'many'"),
    ("[kqe-rdf]\nk = \n", r"kqe-rdf.toml: not valid TOML \("),
    ("kqe-rdf = 3\n", r"kqe-rdf.toml: \[kqe-rdf\] must be a table of settings"),
])
def test_bad_file_values_are_refused(text, message):
    toml(text)
    with pytest.raises(KqeError, match=message):
        Settings.load(env={})


def test_unknown_keys_are_refused_with_the_known_ones():
    with pytest.raises(KqeError, match="unknown setting 'top_k'"):
        Settings.load(env={}, top_k=3)
    toml("[kqe-rdf]\ntop_k = 5\n")
    with pytest.raises(KqeError, match=r"unknown setting 'top_k'; known: .*\bk\b.*prf_docs"):
        Settings.load(env={})


def test_a_named_config_file_must_exist():
    with pytest.raises(KqeError, match=r"config file missing\.toml not found \(named by KQE_CONFIG\)"):
        Settings.load(env={"KQE_CONFIG": "missing.toml"})
    with pytest.raises(KqeError, match=r"config file missing\.toml not found$"):
        Settings.load(file=Path("missing.toml"), env={})


def test_settings_built_in_code_are_checked_too():
    with pytest.raises(KqeError, match="on_unknown_edge must be 'skip' or 'fail'"):
        Settings(on_unknown_edge="ignore")


# ------------------------------------------------------------- settings grouped by subsystem


def test_a_setting_lives_in_its_group_and_keeps_its_flat_name():
    settings = Settings.load(env={"KQE_KAR_HOPS": "2", "KQE_RRF_K": "30"}, server_port=9000)
    assert (settings.kar.hops, settings.hybrid.rrf_k, settings.server.port) == (2, 30, 9000)
    with pytest.raises(AttributeError):  # code reads by group; the flat name is for users' files and variables
        settings.kar_hops
    assert settings == Settings(kar=KARSettings(hops=2), rrf_k=30, server_port=9000)
    assert dataclasses.replace(settings, kar_passages=3).kar == KARSettings(hops=2, passages=3)


def test_a_toml_file_may_group_settings_in_a_table_per_subsystem():
    toml("[kqe-rdf]\nk = 5\nkar_passages = 2\n\n[kqe-rdf.kar]\nhops = 2\n\n[kqe-rdf.qa]\npool_size = 500\n")
    settings = Settings.load(env={})
    assert (settings.k, settings.kar.hops, settings.kar.passages, settings.qa.pool_size) == (5, 2, 2, 500)
    toml("[kqe-rdf.kar]\nhop = 2\n")
    with pytest.raises(KqeError, match=r"unknown setting 'hop' in \[kar\]; known: .*\bhops\b"):
        Settings.load(env={})


@pytest.mark.parametrize("env, text, message", [
    ({"KQE_KAR_NEIGHBOURS": "0"}, "", "setting kar_neighbours must be at least 1, got 0"),
    ({}, "[kqe-rdf.kar]\nneighbours = 0\n", "setting kar_neighbours must be at least 1, got 0"),
    ({}, "[kqe-rdf]\nllm_temperature = 2.5\n", "setting llm_temperature must be between 0 and 2, got 2.5"),
    ({"KQE_KAR_HOPS": "3"}, "", "setting kar_hops must be 1 or 2, got 3"),
    ({"KQE_LINK_TIMEOUT": "0"}, "", "setting link_timeout must be positive, got 0.0"),
    ({"KQE_QA_PRUNE_STAGES": "30,100"}, "", "setting qa_prune_stages must be positive sizes, each smaller"),
])
def test_a_limit_declared_with_a_setting_is_enforced_from_env_and_toml(env, text, message):
    if text:
        toml(text)
    with pytest.raises(KqeError, match=message.replace("(", r"\(")):
        Settings.load(env=env)


def test_every_setting_has_a_kqe_variable_and_reads_back_its_default():
    defaults = Settings()
    env = {f"KQE_{name.upper()}": str(getattr(getattr(defaults, group) if group else defaults, attr))
           for name, (group, attr) in FLAT.items()}
    assert Settings.load(env=env) == defaults
    assert len(DECLARED) == len(FLAT) > 100


def test_code_reads_settings_by_group():
    """`settings.kar.hops`, not `settings.kar_hops`: a flat name is what users write in TOML, KQE_* and options, and
    `grep hops` finds the declaration. (Settings has no flat attributes, so such a read fails only when it runs.)"""
    import ast

    renamed = {name for name, (group, attr) in FLAT.items() if group and name != attr}
    grouped = {name for name, (group, _attr) in FLAT.items() if group}
    reads = []
    for path in sorted([*Path("kqe_rdf").rglob("*.py"), *Path("bench").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in renamed:
                reads.append(f"{path}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.Call) and path.name != "cli.py" and path.parts[0] == "kqe_rdf" \
                    and any(k.arg in grouped for k in node.keywords):  # the command line is an edge: its options
                reads.append(f"{path}:{node.lineno} {ast.unparse(node.func)}(<flat name>=...)")
    assert not reads, reads


def test_every_number_declares_its_limits():
    """A bad value fails when settings are made, before a server starts or a build runs; no hand checks elsewhere."""
    unbounded = [name for name, f in DECLARED.items()
                 if isinstance(f.default, (int, float)) and not isinstance(f.default, bool)
                 and not {"min", "max", "above", "choices", "check"} & set(f.metadata)]
    assert unbounded == []
    with pytest.raises(KqeError, match="server_port must be between 1 and 65535"):
        Settings(server_port=70000)
    with pytest.raises(KqeError, match="server_trusted_proxies must be IP addresses or networks"):
        Settings.load(env={"KQE_SERVER_TRUSTED_PROXIES": "proxy.example"})
