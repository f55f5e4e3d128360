"""One typed configuration object for every knob a user may turn, grouped by the subsystem that reads it.

Values come from (lowest to highest): defaults, a TOML file (``kqe-rdf.toml``
in the working directory or ``$KQE_CONFIG``), ``KQE_*`` environment variables,
then command-line options, which map one-to-one to these settings.

Each group (``settings.kar``, ``settings.server``, ...) is a small frozen dataclass whose fields declare their
limits where they are declared (:func:`setting`); :meth:`Settings.check` checks them all in one loop. Every
setting also has a flat name, ``<group prefix>_<field>`` (``kar_hops`` for ``settings.kar.hops``): the name of
its ``KQE_*`` variable, its TOML key, its command-line option and its keyword to :class:`Settings`. Code reads a
setting by its group (``settings.kar.hops``): the flat names live only at the edges, where users write them.

>>> Settings().k
10
>>> Settings.load(env={"KQE_K": "20", "KQE_KAR_HOPS": "2"}).kar.hops
2
>>> Settings(kar_hops=2) == Settings(kar=KARSettings(hops=2))
True
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, dataclass_transform

from .errors import KqeError


def setting(default: Any, *, min: float | None = None, max: float | None = None, above: float | None = None,
            choices: tuple | None = None, check: Callable[[Any, Any], str | None] | None = None,
            flat: str | None = None, secret: bool = False) -> Any:
    """A setting's default and its limits: at least ``min``, at most ``max``, more than ``above``, one of
    ``choices``, or what ``check(value, group)`` says is wrong with it. ``flat``: its flat name where it is not
    ``<prefix>_<name>``; ``secret``: kept out of ``repr``."""
    limits = {"min": min, "max": max, "above": above, "choices": choices, "check": check, "flat": flat}
    return field(default=default, repr=not secret, metadata={k: v for k, v in limits.items() if v is not None})


def _number(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _either(choices: tuple) -> str:
    shown = [repr(c) if isinstance(c, str) else str(c) for c in choices]
    return " or ".join(shown) if len(shown) < 3 else ", ".join(shown[:-1]) + " or " + shown[-1]


def problem(limits: Mapping[str, Any], value: Any, group: Any = None) -> str | None:
    """What is wrong with ``value`` by the limits declared with its setting, or None.

    >>> problem({"min": 1}, 0), problem({"min": 0, "max": 1}, 1.5), problem({"choices": ("a", "b")}, "c")
    ('must be at least 1', 'must be between 0 and 1', "must be 'a' or 'b'")
    """
    low, high, above = limits.get("min"), limits.get("max"), limits.get("above")
    if "choices" in limits and value not in limits["choices"]:
        return f"must be {_either(limits['choices'])}"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isnan(value):
        return "must be a number"
    if low is not None and high is not None and not low <= value <= high:
        return f"must be between {_number(low)} and {_number(high)}"
    if low is not None and value < low:
        return "must not be negative" if low == 0 else f"must be at least {_number(low)}"
    if high is not None and value > high:
        return f"must be at most {_number(high)}"
    if above is not None and not value > above:
        return "must be positive" if above == 0 else f"must be more than {_number(above)}"
    return limits["check"](value, group) if "check" in limits else None


def _http_url(value: str, _group) -> str | None:
    if value and not value.startswith(("http://", "https://")):
        return "must be an http(s) URL, such as http://localhost:8000/v1 (an LLM) or http://localhost:7878/query"
    return None


#: An index URI: a Milvus server's collection, or a milvus-lite file (kqe_rdf/kb/milvus.py); empty: the in-process engine.
INDEX_URI = "milvus://HOST:PORT/COLLECTION, milvus-lite (a file in the KB folder) or milvus-lite:PATH"


def index_uri_problem(value: str, _group) -> str | None:
    import re

    if not value or value == "milvus-lite" or value.startswith("milvus-lite:") \
            or re.fullmatch(r"milvus://[^/:]+:\d+/[A-Za-z_][A-Za-z0-9_]*", value):
        return None
    return f"must be empty (the in-process engine) or {INDEX_URI}"


def _workers(value: str, _group) -> str | None:
    if value in ("", "local") or value.startswith("ray://"):
        return None
    return "must be empty (this process), 'local' (Ray's local mode) or ray://HOST:PORT (a Ray cluster)"


def _qa_sources(value: str, group: QASettings) -> str | None:
    unknown = set(group.source_list) - {"kg", "text", "tables"}
    return "must name some of kg, text, tables" if unknown or not group.source_list else None


def _prune_stages(value: str, group: QASettings) -> str | None:
    stages = group.stages
    if any(b >= a for a, b in zip([group.pool_size, *stages], stages)) or any(k < 1 for k in stages):
        return (f"must be positive sizes, each smaller than the one before and than qa_pool_size "
                f"({group.pool_size}), e.g. '100,30'")
    return None


@dataclass_transform(frozen_default=True, field_specifiers=(setting,))
class SettingsGroup:
    """The settings of one subsystem, a frozen dataclass; ``prefix`` makes their flat names (``kar`` →
    ``kar_hops``)."""

    PREFIX: ClassVar[str] = ""

    def __init_subclass__(cls, prefix: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.PREFIX = prefix
        dataclass(frozen=True)(cls)


class DocumentSettings(SettingsGroup, prefix="doc"):
    """How a node's document is written when a KB is built."""

    #: Neighbours listed per relation and direction in a node's document (STaRK's add_rel, capped).
    neighbours_per_relation: int = setting(25, min=1)
    #: Characters of a node document at most (documents are also truncated by the encoder).
    max_chars: int = setting(6000, min=1)


class EmbeddingSettings(SettingsGroup, prefix="embedding"):
    """The encoder of dense retrieval."""

    #: Embedding model: "minilm-int8" for the default all-MiniLM-L6-v2 (int8 weights; its bytes are verified),
    #: "minilm-int8-matmul" for the same model with int8 matrix products (made from it on first use, verified;
    #: faster, not the default: issue 52), "minilm-int8-mixed" (the same, the first three layers' FFN
    #: down-projections in float: nearer the export, as fast, not the default either), or a path to a
    #: sentence-transformers-style ONNX export (inputs input_ids, attention_mask[, token_type_ids]; output the
    #: token vectors), e.g. a biomedical or multilingual encoder. A KB records the encoder of its vectors; a KB
    #: embedded with one packaged encoder keeps it until `kqe-rdf kb embed` re-embeds it with the configured one.
    model: str = setting("minilm-int8")
    #: Its tokenizer.json ("" for the one beside the model file).
    tokenizer: str = setting("")
    #: How token vectors become one: "mean" over the attention mask (sentence-transformers' default) or "cls".
    pooling: str = setting("mean", choices=("mean", "cls"))
    #: L2-normalise the vectors (dense search ranks by inner product, which is then the cosine).
    normalize: bool = setting(True)
    #: The dimension the model must give (0: whatever it gives); a mismatch fails when the encoder loads.
    dimension: int = setting(0, min=0)
    #: Tokens per text the encoder sees (the packaged tokenizer says 128; the model takes 256).
    max_tokens: int = setting(256, min=1)
    #: Texts per encoder batch (batches are formed from texts of similar length).
    batch_size: int = setting(32, min=1)
    #: Encode the names of the terms of each hierarchy (HPO's 19,034 phenotypes) when a KB is built, for the reader's
    #: links by meaning ("tall man" → Tall stature); off, a KB's first request that needs them encodes them instead
    #: (and keeps them in the per-machine cache).
    term_names: bool = setting(True)
    #: Who encodes in `kb embed`: empty, this process; "local", Ray's local mode (shards on this machine's cores);
    #: "ray://HOST:PORT", a Ray cluster (needs `pip install 'kqe-rdf[scale]'`).
    workers: str = setting("", check=_workers)


#: The "cpu-server" LLM profile's floor on the timeout and its completion cap (measured: a triplet call took 76 s
#: on the two-core machine, docs/results.md).
CPU_SERVER_TIMEOUT = 300.0
CPU_SERVER_OUTPUT_TOKENS = 256


class LLMSettings(SettingsGroup, prefix="llm"):
    """The LLM: an OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama).

    With neither a base URL nor a model there is no LLM and LLM-based methods run their offline variants.
    OPENAI_BASE_URL and OPENAI_API_KEY are read too (below the TOML file and KQE_* variables). An empty model
    with a base URL means the first model the server lists; an empty base URL with a model means api.openai.com.
    """

    base_url: str = setting("", check=_http_url)
    model: str = setting("")
    api_key: str = setting("", secret=True)
    #: Seconds per request; retries on timeouts, connection errors, 429 and 5xx, with exponential backoff
    #: starting at llm_backoff seconds.
    timeout: float = setting(60.0, above=0.0)
    max_retries: int = setting(4, min=0)
    backoff: float = setting(1.0, min=0.0)
    #: Sampling temperature, and completion tokens per call (0: the server's default, max_tokens not sent).
    temperature: float = setting(0.0, min=0.0, max=2.0)
    max_output_tokens: int = setting(0, min=0)
    #: SQLite response cache, so evaluations are reproducible and re-runs free ("off" disables it).
    cache: Path = setting(Path("data/cache/llm.sqlite"))
    #: Per-query budget that `LLM.budget()` opens: calls and prompt+completion tokens (0: unlimited).
    max_calls_per_query: int = setting(0, min=0)
    max_tokens_per_query: int = setting(0, min=0)
    #: "cpu-server": a small model on a busy CPU box (llama.cpp, one thread, 20-75 s a triplet call): at least
    #: CPU_SERVER_TIMEOUT seconds a call, at most one retry, completions capped at CPU_SERVER_OUTPUT_TOKENS unless a
    #: cap is set (a timed-out call re-asked is another minute lost). "default": the settings as they are.
    profile: str = setting("default", choices=("default", "cpu-server"))


class DenseSettings(SettingsGroup, prefix="dense_ann"):
    """Approximate nearest-neighbour search over the stored embeddings."""

    #: Dense search is exact below this many embedded nodes, and from it on uses the HNSW index stored with
    #: the embeddings (built by `kb embed`): at 100k vectors exact top-k took 14.5 ms a query (p50, loaded
    #: two cores) and grows linearly (573 ms at 1M), the index 0.5-2.4 ms (docs/benchmarks.md, ANN section).
    #: A type filter that selects fewer nodes than this is searched exactly over those nodes.
    threshold: int = setting(100_000, min=1)
    #: HNSW candidate list per search (at least the k asked for). Measured recall@100 against exact search:
    #: 0.980 at 600 on 1M clustered synthetic vectors (0.957 at 200), 0.999 at 600 on the bio KB's real ones.
    ef_search: int = setting(600, min=1)
    #: Threads that build the HNSW graph (0: every core). Several threads build a slightly different graph
    #: each time (which near-ties it misses varies); one builds the same graph from the same vectors.
    build_threads: int = setting(0, min=0)


def _share(value: str, _group) -> str | None:
    if value == "auto":
        return None
    try:
        share = float(value)
    except ValueError:
        return "must be 'auto' or BM25's share between 0 and 1, e.g. '0.7'"
    return None if 0.0 <= share <= 1.0 else "must be 'auto' or BM25's share between 0 and 1, e.g. '0.7'"


class HybridSettings(SettingsGroup, prefix="hybrid"):
    """Fusion of BM25 and dense rankings: ``hybrid`` weighs their normalised scores, ``hybrid-rrf`` fuses their
    ranks."""

    #: Candidates each side of a hybrid fusion contributes, and the RRF constant (``hybrid-rrf``).
    depth: int = setting(100, min=1)
    rrf_k: int = setting(60, min=0, flat="rrf_k")
    #: BM25's share of ``hybrid`` (dense gets the rest): "auto" takes the weight the KB was fitted with (`kqe-rdf
    #: kb tune-fusion`), else weighs each request by how far each side's best match stands out; a number from 0
    #: to 1 fixes it.
    weight: str = setting("auto", check=_share)
    #: How each side's scores are put on one scale before they are weighed (when no fitted weight says it):
    #: "minmax" (best 1, last 0) or "zscore".
    normalisation: str = setting("minmax", choices=("minmax", "zscore"))


class PRFSettings(SettingsGroup, prefix="prf"):
    """RM3 pseudo-relevance feedback: feedback documents, expansion terms, weight of the original query."""

    docs: int = setting(10, min=1)
    terms: int = setting(10, min=1)
    original_weight: float = setting(0.5, min=0.0, max=1.0)


class FourStepSettings(SettingsGroup, prefix="fourstep"):
    """4StepFocus: how its readings rank the KB's nodes."""

    #: "soft" (rank by satisfied triplet paths) or "strict" (all triplets must hold).
    mode: str = setting("soft", choices=("soft", "strict"))
    #: Soft mode for sets of terms of one hierarchy (HPO phenotypes, categories): "hierarchy" gives
    #: partial credit by the information content of the most informative common ancestor (closures stored
    #: with the KB); "exact" counts only paths through the term or its descendants (the earlier soft mode).
    matcher: str = setting("hierarchy", choices=("hierarchy", "exact"))
    #: Hierarchy matching: each term's IC ** power is averaged (1 = Resnik's best-match average; higher
    #: powers favour nodes that explain the specific terms). 3 measured best on the phenopacket dev split.
    ic_power: float = setting(3.0, above=0.0)
    #: Hierarchy matching: weight of the request's BM25 score (normalised to the best hit) added to the
    #: structural score; 0 ranks by structure alone (ties broken by similarity).
    text_weight: float = setting(0.03, min=0.0)
    #: Hierarchy matching: what a node's match to negated terms ("X was not observed") does. "context": adds
    #: ``fourstep_negated_weight`` × that match, since the terms a request rules out name the part of the
    #: hierarchy it is about (a case report lists the absent features of the disease it suspects); "cost":
    #: subtracts it (negation as evidence against); "ignore". "context" measured best on the phenopacket dev
    #: split, "cost" worst at every weight (docs/results.md).
    negated: str = setting("context", choices=("context", "cost", "ignore"))
    negated_weight: float = setting(0.05, min=0.0)
    #: How much a term the request is unsure of ("possible hypotonia", "suspected ...") counts, against 1 for a term
    #: it states: a weaker constraint, not none.
    uncertain_weight: float = setting(0.5, min=0.0, max=1.0)
    #: When 4step asks the LLM for triplets: "unsure" only where the offline reading abstains, finds no candidate
    #: or leaves request words unread (a confident grounded reading costs no call); "always" for every request.
    #: Either way its checked reading competes with the offline one on the graph's evidence.
    llm_reading: str = setting("unsure", choices=("unsure", "always"))
    #: Let the LLM rerank the top ``rerank_depth`` results (needs an LLM).
    rerank: bool = setting(False, flat="rerank")
    rerank_depth: int = setting(10, min=1, flat="rerank_depth")


class ExpansionSettings(SettingsGroup, prefix="expansion"):
    """Query expansion (`kqe-rdf expand`, methods kar*, hyde, q2d, rar, agr, prf-docs, lkqe*)."""

    #: Tokens (about 4 characters each) of knowledge an expansion may use: KAR's document triples, the
    #: passages of PRF and RAR; and completion tokens per expansion call of the LLM.
    context_tokens: int = setting(600, min=1)
    max_tokens: int = setting(256, min=1)
    #: Passages PRF, RAR and AGR read (top of the final retriever on the unexpanded query).
    docs: int = setting(3, min=0)
    #: Longest request `expand` takes (characters): a pasted document is not a query.
    request_max_chars: int = setting(10_000, min=1, flat="expand_max_chars")
    #: lkqe-offline's expansion is weighed by the share of new hits it brings to BM25's first
    #: `expansion_weight_depth` for the query: weight = that share / `expansion_weight_full`, at most 1; 0 when it
    #: brings none (BM25's own results). 0 turns the weighing off (weight 1). Chosen on SciFact train and DL19
    #: (docs/results-log.md, issue 53). kar-offline weighs its own way (`kar_weight_full`): by this rule it lost
    #: 7 points of Hit@1 on MetaQA 1-hop.
    weight_depth: int = setting(8, min=1)
    weight_full: float = setting(0.5, min=0.0, max=1.0)


class KARSettings(SettingsGroup, prefix="kar"):
    """KAR query expansion (methods kar*)."""

    #: Hops of relation propagation (1 or 2; the second hop grows only from the best first-hop neighbours),
    #: neighbours kept by document-based filtering, and expansions the LLM writes.
    hops: int = setting(1, choices=(1, 2))
    neighbours: int = setting(10, min=1)
    expansions: int = setting(3, min=1)
    #: Offline: passages appended, one per best neighbour (its facts, then its document's sentence nearest
    #: the request). One: the final retriever reads the likeliest neighbour's whole passage (phenopackets dev,
    #: hybrid final: 31.18 Hit@1 with one, 28.85 with three; docs/results.md).
    passages: int = setting(1, min=1)
    #: Offline: take the entities and the facts from the structural reader's grounded reading when it has
    #: one (the nodes its paths reach, with the facts along them); False: every neighbour of the linked names.
    grounded: bool = setting(True)
    #: The final retriever over the expanded query (bm25 when the KB has no embeddings), one of the retrieval
    #: methods: "hybrid-rrf" (BM25 and dense fused by reciprocal rank, what KAR was measured with), "hybrid"
    #: (their scores weighed), "dense" or "bm25".
    final: str = setting("hybrid-rrf", choices=("dense", "bm25", "hybrid", "hybrid-rrf"))
    #: Document-based filtering: neighbours' documents scored by the encoder ("dense") or by the encoder
    #: and BM25 fused by reciprocal rank ("hybrid": on a phenotype list the encoder alone ranks the right
    #: disease first for 6% of cases, BM25 for 19%; with it offline KAR keeps the reading's first answer more).
    filter: str = setting("hybrid", choices=("dense", "hybrid"))
    #: Neighbours fetched per node, relation and hop (the SPARQL LIMIT that keeps hubs fast), and
    #: documents encoded per query for neighbours the KB holds no embedding of (the rest go unscored).
    fanout: int = setting(1000, min=1)
    encode: int = setting(32, min=0)
    #: Tokens of a document encoded on the fly (the stored embeddings keep embedding_max_tokens).
    encode_tokens: int = setting(128, min=1)
    #: kar-namefilter: a hop that reaches more than `kar_name_hub` names (a hub term: Seizure leads to 3,800
    #: diseases, 20 s of encoding) scores only `kar_encode_names` of them, those whose names share most words
    #: with the request, then whose documents BM25 ranks first for it; smaller hops are scored whole.
    name_hub: int = setting(400, min=0)
    encode_names: int = setting(128, min=0)
    #: Nodes each entity resolves to, nodes the query itself (a pseudo-entity) resolves to by the
    #: final retriever, and entities taken from a query at most.
    entity_nodes: int = setting(1, min=1)
    query_nodes: int = setting(1, min=0)
    max_entities: int = setting(12, min=1)
    #: Offline, the expansion's weight is the share of the request's words its evidence reaches (linked
    #: entities' names, the relations read from them) over `kar_weight_full`, at most 1; 0 turns the weighing
    #: off (weight 1). A quarter: on MetaQA 1-hop no question of a sample of 300 changes its first answer, at a
    #: half one is lost and one won (docs/results-log.md, issue 53).
    weight_full: float = setting(0.25, min=0.0, max=1.0)


class LKQESettings(SettingsGroup, prefix="lkqe"):
    """LKQE: BM25 passages read, key sentences kept, expansion length at most this many times the query's
    words, times the query is repeated in the final BM25 query, and whether per-query triples are stored
    as named graphs in <kb>/expansions/."""

    docs: int = setting(8, min=1)
    sentences: int = setting(5, min=1)
    max_ratio: int = setting(15, min=1)
    query_repeat: int = setting(3, min=1)
    store: bool = setting(True)


class QASettings(SettingsGroup, prefix="qa"):
    """Question answering (`kqe-rdf ask`, `/answer`)."""

    #: The sources used by default (comma-separated subset of kg,text,tables), BM25 pool size, the pruning
    #: stages after it (comma-separated, each smaller), and the weights of BM25, dense similarity and entity
    #: overlap in each stage's fusion.
    sources: str = setting("kg,text,tables", check=_qa_sources)
    pool_size: int = setting(1000, min=1)
    prune_stages: str = setting("100,30", check=_prune_stages)
    bm25_weight: float = setting(1.0, min=0.0)
    dense_weight: float = setting(1.0, min=0.0)
    entity_weight: float = setting(1.0, min=0.0)
    #: ... and of answer-type match (a piece names an entity of the question's answer type).
    type_weight: float = setting(1.0, min=0.0)
    #: Dense similarity is computed once at most this many pieces remain (encoding costs about 4 ms per
    #: sentence on 2 cores).
    dense_depth: int = setting(100, min=0)
    #: KG evidence: edges walked from the question's entities, nodes the walk goes on from per hop (those of
    #: the best-fitting facts), and facts read per node (keeps hubs such as "Drama" from flooding the pool).
    kg_hops: int = setting(3, min=1)
    expand_nodes: int = setting(30, min=1)
    facts_per_node: int = setting(100, min=1)
    #: Text and table evidence: the best BM25 sentences of the whole KB, and table rows, added per question.
    text_hits: int = setting(100, min=0)
    table_hits: int = setting(100, min=0)
    #: Structural candidates (part of the kg source): the top qa_focus_hits 4StepFocus hits per question become
    #: evidence (0: none), and qa_focus_weight weighs their structural score in pruning and in the offline reader.
    focus_hits: int = setting(10, min=0)
    focus_weight: float = setting(1.0, min=0.0)
    #: When the structural reader has a grounded reading of the question (and the kg source is used), the answer
    #: is 4StepFocus's first (offline reading, as 4step-offline), cited with its KG path; qa_grounded_depth of
    #: its ranked answers are the candidates. False: every answer is read from the pruned evidence.
    grounded: bool = setting(True)
    grounded_depth: int = setting(10, min=1)
    #: The most answers `ask` lists for a list question ("which films did X act in"): every node a reading's
    #: paths reach equally well, up to this many.
    max_answers: int = setting(1000, min=1)

    @property
    def source_list(self) -> tuple[str, ...]:
        """``sources`` as a tuple, e.g. ("kg", "text")."""
        return tuple(s.strip() for s in self.sources.split(",") if s.strip())

    @property
    def stages(self) -> tuple[int, ...]:
        """``prune_stages`` as sizes, e.g. (100, 30)."""
        try:
            return tuple(int(k) for k in self.prune_stages.split(",") if k.strip())
        except ValueError:
            raise KqeError(f"setting qa_prune_stages must be comma-separated sizes such as '100,30', "
                           f"got {self.prune_stages!r}") from None


def _proxies(value: str, _group) -> str | None:
    import ipaddress

    for proxy in _items(value):
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            return f"must be IP addresses or networks, such as '127.0.0.1, 10.0.0.0/8' ({proxy!r} is neither)"
    return None


def _absolute_iri(value: str, _group) -> str | None:
    from pyoxigraph import NamedNode

    if not value:
        return None
    try:
        NamedNode(value)
    except ValueError:
        return "must be an absolute IRI, such as http://example.org/kb/"
    return None


def _items(text: str) -> list[str]:
    """A space- or comma-separated setting's items.

    >>> _items("127.0.0.1, 10.0.0.0/8 ::1")
    ['127.0.0.1', '10.0.0.0/8', '::1']
    """
    import re

    return [item for item in re.split(r"[\s,]+", text) if item]


class ServerSettings(SettingsGroup, prefix="server"):
    """`kqe-rdf serve` and the SPARQL limits every query and update is held to."""

    #: Address to listen on (loopback by default; the KB is served read-only).
    host: str = setting("127.0.0.1")
    port: int = setting(7878, min=1, max=65535)
    #: Seconds a SPARQL query, update or REST call may run in its worker; then the client gets 503 and the
    #: worker is killed (its CPU and memory are freed at once). A request waits as long for a free worker.
    query_timeout: float = setting(30.0, above=0.0)
    #: Most solutions (or triples) one SPARQL response carries; more are cut and the response says so.
    result_cap: int = setting(10000, min=1)
    #: Largest request body or query string accepted (bytes); larger requests get 413.
    max_request_bytes: int = setting(1_000_000, min=1024)
    #: Jobs evaluated at once: worker processes, each with the store open read-only (one worker, read-write,
    #: with an update token); further requests wait, then get 503 when all stay busy.
    query_slots: int = setting(4, min=1)
    #: Most workers one client may hold at once (a client is its Authorization credentials, else its address);
    #: 0, the default: all but one (server_query_slots - 1, at least 1), so one client's expensive queries never
    #: take every worker. A freed worker goes to the waiting client that holds the fewest.
    client_workers: int = setting(0, min=0)
    #: Reverse proxies whose X-Forwarded-For (and X-Forwarded-Proto) name the client: their IP addresses or
    #: networks, space- or comma-separated (e.g. "127.0.0.1" for a proxy on this machine). Empty (the default):
    #: the header is never read and a client is its socket's address, which it cannot forge to pass for many.
    trusted_proxies: str = setting("", check=_proxies)
    #: Memory one worker may allocate (MiB, RLIMIT_DATA); a job that needs more is stopped with 503. A worker
    #: serving every route of the bio KB (store, BM25, documents, encoder) uses about 450.
    worker_memory_mb: int = setting(2048, min=256)
    #: MiB of recent SELECT/ASK answers a read-only server keeps, to answer a repeated query without a worker
    #: (never queries with RAND/NOW/UUID/BNODE or SERVICE; emptied when the KB is rebuilt); 0: off.
    result_cache_mb: int = setting(64, min=0)
    #: Seconds a client has to send a request's headers, and its body (slow or half-open connections are
    #: closed, and a late body gets 408).
    header_timeout: float = setting(10.0, above=0.0)
    body_timeout: float = setting(30.0, above=0.0)
    #: SPARQL Update on /update is off unless this token is set; requests must send `Authorization: Bearer TOKEN`.
    update_token: str = setting("", secret=True)
    #: SERVICE endpoints a query may call, space- or comma-separated exact URLs (others are refused:
    #: SERVICE to arbitrary hosts is server-side request forgery). `urn:kqe:search` is always allowed.
    service_allow: str = setting("")
    #: With no SERVICE allow-list (and no remote store), SPARQL queries and updates (server and `kqe-rdf sparql`)
    #: are evaluated on a thread in a network namespace of its own, where no connection can be opened
    #: (kqe_rdf/service/isolation.py); where the kernel does not allow it, or with this off, every query and
    #: update takes the verified path instead: parsed by the verifier, which writes the text that runs.
    network_isolation: bool = setting(True)
    #: The base IRI relative IRIs in a query or update resolve against; empty: the request's URL at the endpoint.
    base_iri: str = setting("", check=_absolute_iri)
    #: Whether a query without a dataset (no FROM, no default-graph-uri) sees every graph as its default graph
    #: (the KB's graphs together); off: only the store's default graph, as `oxigraph serve` without
    #: --union-default-graph (what the W3C test suites expect).
    union_default_graph: bool = setting(True)
    #: Size limits on every SPARQL query and update (server /sparql, /query, /update and `kqe-rdf sparql`),
    #: checked on the text's code (strings and comments aside) before Oxigraph sees it: pyoxigraph parses and
    #: evaluates recursively, and a few KB of nesting overflow its native stack and kill the process. Measured
    #: crash points (8 MiB stack, pyoxigraph 0.5.13) and the limits, each at least 4x below the smallest crash
    #: of its kind: characters in the text;
    max_query_chars: int = setting(1_000_000, min=1)
    #: nesting of ( { [ together (crashes from 832 nested FILTER EXISTS, 1,168 subqueries, 2,176 braces);
    max_query_depth: int = setting(128, min=1)
    #: the longest run of unary ! (crashes from 9,216);
    max_query_negations: int = setting(256, min=1)
    #: ||, && and | operators in the whole text (a chain crashes from 9,216 || or &&, 10,880 path |);
    max_query_logical_operators: int = setting(2000, min=1)
    #: + and * anywhere, - and / outside <scheme://...> IRIs (a chain crashes from 6,784 + or *);
    max_query_arithmetic_operators: int = setting(1500, min=1)
    #: the words UNION, OPTIONAL and MINUS (a chain crashes from 2,592 MINUS, 6,528 UNION or OPTIONAL).
    max_query_patterns: int = setting(500, min=1)
    #: Origins allowed by CORS, space- or comma-separated ("*" for any); empty: CORS off.
    cors_origins: str = setting("")

    @property
    def proxies(self) -> list[str]:
        """``trusted_proxies`` as a list, e.g. ['127.0.0.1', '10.0.0.0/8']."""
        return _items(self.trusted_proxies)


class LinkSettings(SettingsGroup, prefix="link"):
    """`kqe-rdf link`: requests per second to the external endpoint, seconds a request may take, retries of a
    request that timed out or got 429/5xx (each said on stderr), the confidence a candidate needs to be
    written as a link (0.8: an identifier, label or alias match of an item of the expected class; see
    kqe_rdf/service/links.py), and the subclass steps (P279, rdfs:subClassOf) followed from an item's class
    to an expected one."""

    rate: float = setting(2.0, above=0.0)
    timeout: float = setting(30.0, above=0.0)
    retries: int = setting(3, min=0)
    min_confidence: float = setting(0.8, min=0.0, max=1.0)
    class_depth: int = setting(4, min=0)


class StoreSettings(SettingsGroup, prefix="store"):
    """A remote SPARQL 1.1 query URL holding the KB's triples instead of the embedded store (indexes stay
    local; see kqe_rdf/kb/store.py), and seconds per request to it. Empty: the embedded Oxigraph store."""

    endpoint: str = setting("", check=_http_url)
    timeout: float = setting(60.0, above=0.0)


class IndexSettings(SettingsGroup, prefix="index"):
    """Which engine holds the BM25 index (`kb build --text`) and the searchable vectors (`kb embed --vectors`):
    empty, the in-process one (Tantivy, usearch); else a Milvus URI (kqe_rdf/kb/milvus.py, docs/scale.md). A KB
    records where its indexes are: these settings are read when it is built or embedded, not when opened."""

    text: str = setting("", check=index_uri_problem)
    vectors: str = setting("", check=index_uri_problem)


def group() -> Any:
    """A group of settings: its class is the field's type, its defaults the group's defaults."""
    return field(default=None, metadata={"group": True})


@dataclass(frozen=True, init=False)
class Settings:
    """Every setting: three general ones, then one group per subsystem."""

    #: The knowledge-base directory (store, indexes, manifest).
    kb: Path = setting(Path("data/kb/bio"))
    #: Results per query.
    k: int = setting(10, min=1)
    #: What to do with an edge whose end is not a node of the KB: "skip" (counted) or "fail".
    on_unknown_edge: str = setting("skip", choices=("skip", "fail"))
    documents: DocumentSettings = group()
    embedding: EmbeddingSettings = group()
    llm: LLMSettings = group()
    dense: DenseSettings = group()
    hybrid: HybridSettings = group()
    prf: PRFSettings = group()
    fourstep: FourStepSettings = group()
    expansion: ExpansionSettings = group()
    kar: KARSettings = group()
    lkqe: LKQESettings = group()
    qa: QASettings = group()
    server: ServerSettings = group()
    link: LinkSettings = group()
    store: StoreSettings = group()
    index: IndexSettings = group()

    def __init__(self, **values: Any) -> None:
        """Settings from flat names (``kar_hops=2``) and whole groups (``kar=KARSettings(hops=2)``); a flat name
        beats its group's value. Checked at once (:meth:`check`)."""
        flat_given = {name: values.pop(name) for name in list(values) if name in FLAT and FLAT[name][0]}
        for f in fields(self):
            if f.metadata.get("group"):
                given = values.pop(f.name, None) or GROUPS[f.name]()
                mine = {FLAT[n][1]: v for n, v in flat_given.items() if FLAT[n][0] == f.name}
                object.__setattr__(self, f.name, dataclasses.replace(given, **mine) if mine else given)
            else:
                object.__setattr__(self, f.name, values.pop(f.name, f.default))
        if values:
            raise TypeError(f"unknown settings: {', '.join(sorted(values))}")
        self.check()

    def check(self) -> None:
        """Every setting against the limits declared with it (:func:`setting`); the first that is out of them
        is an error that names it by its flat name. Run when settings are made, not where a value is first
        used, so a bad value fails before a long build starts."""
        for name, (group_name, attr) in FLAT.items():
            owner = getattr(self, group_name) if group_name else self
            value = getattr(owner, attr)
            wrong = problem(DECLARED[name].metadata, value, owner)
            if wrong:
                raise KqeError(f"setting {name} {wrong}, got {value!r}")

    @classmethod
    def load(cls, file: Path | None = None, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        # The OpenAI client's own variables, as users set them for every tool; the file and KQE_* beat them.
        values.update({name: env[key] for key, name in (("OPENAI_BASE_URL", "llm_base_url"),
                                                        ("OPENAI_API_KEY", "llm_api_key")) if env.get(key)})
        named = Path(file) if file is not None else Path(env["KQE_CONFIG"]) if "KQE_CONFIG" in env else None
        path = named or Path("kqe-rdf.toml")
        if named is not None and not named.is_file():
            raise KqeError(f"config file {named} not found" + ("" if file is not None else " (named by KQE_CONFIG)"))
        if path.is_file():
            values.update(_read_toml(path))
        for name in FLAT:
            key = f"KQE_{name.upper()}"
            if key in env:
                values[name] = env[key]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls._coerce(values)

    @classmethod
    def _coerce(cls, values: Mapping[str, object]) -> Settings:
        out: dict[str, object] = {}
        for name, value in values.items():
            if name not in FLAT:
                raise KqeError(f"unknown setting {name!r}; known: {', '.join(sorted(FLAT))}")
            kind = type(DECLARED[name].default)
            if kind is bool:
                out[name] = _boolean(name, value)
                continue
            try:
                # No silent truncation or re-typing of TOML values: `k = 2.5` or `k = true` is an error.
                if isinstance(value, bool) or (kind is int and isinstance(value, float)) or (
                        kind is str and not isinstance(value, str)):
                    raise TypeError(value)
                out[name] = Path(str(value)) if issubclass(kind, Path) else kind(value)
            except (TypeError, ValueError):
                raise KqeError(f"setting {name} must be a {kind.__name__}, got {value!r}") from None
        return cls(**out)


def _read_toml(path: Path) -> dict[str, object]:
    """The settings of a TOML file by flat name: keys of ``[kqe-rdf]`` (or of the top level), and keys of a
    group's table (``[kqe-rdf.kar]`` ``hops = 2`` is ``kar_hops = 2``)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise KqeError(f"{path}: not valid TOML ({exc})") from None
    section = data.get("kqe-rdf", data)
    if not isinstance(section, dict):
        raise KqeError(f"{path}: [kqe-rdf] must be a table of settings")
    out: dict[str, object] = {}
    for key, value in section.items():
        if key in GROUPS and isinstance(value, dict):
            for name, inner in value.items():
                if (key, name) not in FLAT_OF:
                    raise KqeError(f"{path}: unknown setting {name!r} in [{key}]; known: "
                                   f"{', '.join(sorted(n for g, n in FLAT_OF if g == key))}")
                out[FLAT_OF[(key, name)]] = inner
        else:
            out[key] = value
    return out


def _boolean(name: str, value: object) -> bool:
    """true/false from TOML, or yes/no, true/false, 1/0, on/off from the environment."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise KqeError(f"setting {name} must be true or false, got {value!r}")


def _declared() -> Iterator[tuple[str, str | None, dataclasses.Field]]:
    """``(flat name, group, field)`` of every setting, in declaration order."""
    for f in fields(Settings):
        if f.metadata.get("group"):
            kind = GROUPS[f.name]
            for inner in fields(kind):
                yield inner.metadata.get("flat", f"{kind.PREFIX}_{inner.name}"), f.name, inner
        else:
            yield f.name, None, f


#: Group name → its class.
GROUPS: dict[str, type] = {f.name: f.type if isinstance(f.type, type) else globals()[f.type]
                           for f in fields(Settings) if f.metadata.get("group")}
#: Flat name → (group, field name); the group is None for the general settings.
FLAT: dict[str, tuple[str | None, str]] = {name: (g, f.name) for name, g, f in _declared()}
#: (group, field name) → flat name.
FLAT_OF: dict[tuple[str | None, str], str] = {where: name for name, where in FLAT.items()}
#: Flat name → the field that declares the setting (its default and limits).
DECLARED: dict[str, dataclasses.Field] = {name: f for name, _g, f in _declared()}
