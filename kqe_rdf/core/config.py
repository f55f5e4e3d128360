"""One typed configuration object for every knob a user may turn.

Values come from (lowest to highest): defaults, a TOML file (``kqe-rdf.toml``
in the working directory or ``$KQE_CONFIG``), ``KQE_*`` environment variables,
then command-line options, which map one-to-one to these fields.

>>> Settings().k
10
>>> Settings.load(env={"KQE_K": "20"}).k
20
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from .errors import KqeError


@dataclass(frozen=True)
class Settings:
    #: The knowledge-base directory (store, indexes, manifest).
    kb: Path = Path("data/kb/bio")
    #: Results per query.
    k: int = 10
    #: Neighbours listed per relation and direction in a node's document (STaRK's add_rel, capped).
    doc_neighbours_per_relation: int = 25
    #: Characters of a node document at most (documents are also truncated by the encoder).
    doc_max_chars: int = 6000
    #: Embedding model: "minilm-int8" for the default all-MiniLM-L6-v2 (int8; its bytes are verified), or a path
    #: to a sentence-transformers-style ONNX export (inputs input_ids, attention_mask[, token_type_ids]; output
    #: the token vectors), e.g. a biomedical or multilingual encoder. A KB records the encoder of its vectors.
    embedding_model: str = "minilm-int8"
    #: Its tokenizer.json ("" for the one beside the model file).
    embedding_tokenizer: str = ""
    #: How token vectors become one: "mean" over the attention mask (sentence-transformers' default) or "cls".
    embedding_pooling: str = "mean"
    #: L2-normalise the vectors (dense search ranks by inner product, which is then the cosine).
    embedding_normalize: bool = True
    #: The dimension the model must give (0: whatever it gives); a mismatch fails when the encoder loads.
    embedding_dimension: int = 0
    #: Tokens per text the encoder sees (the packaged tokenizer says 128; the model takes 256).
    embedding_max_tokens: int = 256
    #: Texts per encoder batch (batches are formed from texts of similar length).
    embedding_batch_size: int = 32
    #: Dense search is exact below this many embedded nodes, and from it on uses the HNSW index stored with
    #: the embeddings (built by `kb embed`): at 100k vectors exact top-k took 14.5 ms a query (p50, loaded
    #: two cores) and grows linearly (573 ms at 1M), the index 0.5-2.4 ms (docs/benchmarks.md, ANN section).
    #: A type filter that selects fewer nodes than this is searched exactly over those nodes.
    dense_ann_threshold: int = 100_000
    #: HNSW candidate list per search (at least the k asked for). Measured recall@100 against exact search:
    #: 0.980 at 600 on 1M clustered synthetic vectors (0.957 at 200), 0.999 at 600 on the bio KB's real ones.
    dense_ann_ef_search: int = 600
    #: Candidates each side of a hybrid fusion contributes, and the RRF constant.
    hybrid_depth: int = 100
    rrf_k: int = 60
    #: RM3 pseudo-relevance feedback: feedback documents, expansion terms, weight of the original query.
    prf_docs: int = 10
    prf_terms: int = 10
    prf_original_weight: float = 0.5
    #: 4StepFocus: "soft" (rank by satisfied triplet paths) or "strict" (all triplets must hold).
    fourstep_mode: str = "soft"
    #: 4StepFocus soft mode for sets of terms of one hierarchy (HPO phenotypes, categories): "hierarchy" gives
    #: partial credit by the information content of the most informative common ancestor (closures stored
    #: with the KB); "exact" counts only paths through the term or its descendants (the earlier soft mode).
    fourstep_matcher: str = "hierarchy"
    #: Hierarchy matching: each term's IC ** power is averaged (1 = Resnik's best-match average; higher
    #: powers favour nodes that explain the specific terms). 3 measured best on the phenopacket dev split.
    fourstep_ic_power: float = 3.0
    #: Hierarchy matching: weight of the request's BM25 score (normalised to the best hit) added to the
    #: structural score; 0 ranks by structure alone (ties broken by similarity).
    fourstep_text_weight: float = 0.03
    #: Hierarchy matching: what a node's match to negated terms ("X was not observed") does. "context": adds
    #: ``fourstep_negated_weight`` × that match, since the terms a request rules out name the part of the
    #: hierarchy it is about (a case report lists the absent features of the disease it suspects); "cost":
    #: subtracts it (negation as evidence against); "ignore". "context" measured best on the phenopacket dev
    #: split, "cost" worst at every weight (docs/results.md).
    fourstep_negated: str = "context"
    fourstep_negated_weight: float = 0.05
    #: 4StepFocus: let the LLM rerank the top ``rerank_depth`` results (needs an LLM).
    rerank: bool = False
    rerank_depth: int = 10
    #: What to do with an edge whose end is not a node of the KB: "skip" (counted) or "fail".
    on_unknown_edge: str = "skip"
    #: The LLM: an OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama). With neither a base URL nor a
    #: model there is no LLM and LLM-based methods run their offline variants. OPENAI_BASE_URL and
    #: OPENAI_API_KEY are read too (below the TOML file and KQE_* variables). An empty model with a base URL
    #: means the first model the server lists; an empty base URL with a model means api.openai.com.
    llm_base_url: str = ""
    llm_model: str = ""
    llm_api_key: str = dataclasses.field(default="", repr=False)
    #: Seconds per request; retries on timeouts, connection errors, 429 and 5xx, with exponential backoff
    #: starting at llm_backoff seconds.
    llm_timeout: float = 60.0
    llm_max_retries: int = 4
    llm_backoff: float = 1.0
    #: Sampling temperature, and completion tokens per call (0: the server's default, max_tokens not sent).
    llm_temperature: float = 0.0
    llm_max_output_tokens: int = 0
    #: SQLite response cache, so evaluations are reproducible and re-runs free ("off" disables it).
    llm_cache: Path = Path("data/cache/llm.sqlite")
    #: Per-query budget that `LLM.budget()` opens: calls and prompt+completion tokens (0: unlimited).
    llm_max_calls_per_query: int = 0
    llm_max_tokens_per_query: int = 0
    #: `kqe-rdf serve`: address to listen on (loopback by default; the KB is served read-only).
    server_host: str = "127.0.0.1"
    server_port: int = 7878
    #: Seconds a SPARQL query, update or REST call may run in its worker; then the client gets 503 and the
    #: worker is killed (its CPU and memory are freed at once). A request waits as long for a free worker.
    server_query_timeout: float = 30.0
    #: Most solutions (or triples) one SPARQL response carries; more are cut and the response says so.
    server_result_cap: int = 10000
    #: Largest request body or query string accepted (bytes); larger requests get 413.
    server_max_request_bytes: int = 1_000_000
    #: Jobs evaluated at once: worker processes, each with the store open read-only (one worker, read-write,
    #: with an update token); further requests wait, then get 503 when all stay busy.
    server_query_slots: int = 4
    #: Most workers one client may hold at once (a client is its Authorization credentials, else its address);
    #: 0, the default: all but one (server_query_slots - 1, at least 1), so one client's expensive queries never
    #: take every worker. A freed worker goes to the waiting client that holds the fewest.
    server_client_workers: int = 0
    #: Reverse proxies whose X-Forwarded-For (and X-Forwarded-Proto) name the client: their IP addresses or
    #: networks, space- or comma-separated (e.g. "127.0.0.1" for a proxy on this machine). Empty (the default):
    #: the header is never read and a client is its socket's address, which it cannot forge to pass for many.
    server_trusted_proxies: str = ""
    #: Memory one worker may allocate (MiB, RLIMIT_DATA); a job that needs more is stopped with 503. A worker
    #: serving every route of the bio KB (store, BM25, documents, encoder) uses about 450.
    server_worker_memory_mb: int = 2048
    #: MiB of recent SELECT/ASK answers a read-only server keeps, to answer a repeated query without a worker
    #: (never queries with RAND/NOW/UUID/BNODE or SERVICE; emptied when the KB is rebuilt); 0: off.
    server_result_cache_mb: int = 64
    #: Seconds a client has to send a request's headers, and its body (slow or half-open connections are
    #: closed, and a late body gets 408).
    server_header_timeout: float = 10.0
    server_body_timeout: float = 30.0
    #: SPARQL Update on /update is off unless this token is set; requests must send `Authorization: Bearer TOKEN`.
    server_update_token: str = dataclasses.field(default="", repr=False)
    #: SERVICE endpoints a query may call, space- or comma-separated exact URLs (others are refused:
    #: SERVICE to arbitrary hosts is server-side request forgery). `urn:kqe:search` is always allowed.
    server_service_allow: str = ""
    #: With no SERVICE allow-list (and no remote store), SPARQL queries and updates (server and `kqe-rdf sparql`)
    #: are evaluated on a thread in a network namespace of its own, where no connection can be opened
    #: (kqe_rdf/service/isolation.py); where the kernel does not allow it, or with this off, every query and
    #: update takes the verified path instead: parsed by the verifier, which writes the text that runs.
    server_network_isolation: bool = True
    #: The base IRI relative IRIs in a query or update resolve against; empty: the request's URL at the endpoint.
    server_base_iri: str = ""
    #: Whether a query without a dataset (no FROM, no default-graph-uri) sees every graph as its default graph
    #: (the KB's graphs together); off: only the store's default graph, as `oxigraph serve` without
    #: --union-default-graph (what the W3C test suites expect).
    server_union_default_graph: bool = True
    #: Size limits on every SPARQL query and update (server /sparql, /query, /update and `kqe-rdf sparql`),
    #: checked on the text's code (strings and comments aside) before Oxigraph sees it: pyoxigraph parses and
    #: evaluates recursively, and a few KB of nesting overflow its native stack and kill the process. Measured
    #: crash points (8 MiB stack,
    #: pyoxigraph 0.5.13) and the limits, each at least 4x below the smallest crash of its kind:
    #: characters in the text;
    server_max_query_chars: int = 1_000_000
    #: nesting of ( { [ together (crashes from 832 nested FILTER EXISTS, 1,168 subqueries, 2,176 braces);
    server_max_query_depth: int = 128
    #: the longest run of unary ! (crashes from 9,216);
    server_max_query_negations: int = 256
    #: ||, && and | operators in the whole text (a chain crashes from 9,216 || or &&, 10,880 path |);
    server_max_query_logical_operators: int = 2000
    #: + and * anywhere, - and / outside <scheme://...> IRIs (a chain crashes from 6,784 + or *);
    server_max_query_arithmetic_operators: int = 1500
    #: the words UNION, OPTIONAL and MINUS (a chain crashes from 2,592 MINUS, 6,528 UNION or OPTIONAL).
    server_max_query_patterns: int = 500
    #: Origins allowed by CORS, space- or comma-separated ("*" for any); empty: CORS off.
    server_cors_origins: str = ""
    #: `kqe-rdf link`: requests per second to the external endpoint, seconds a request may take, retries of a
    #: request that timed out or got 429/5xx (each said on stderr), the confidence a candidate needs to be
    #: written as a link (0.8: an identifier, label or alias match of an item of the expected class; see
    #: kqe_rdf/service/links.py), and the subclass steps (P279, rdfs:subClassOf) followed from an item's class
    #: to an expected one.
    link_rate: float = 2.0
    link_timeout: float = 30.0
    link_retries: int = 3
    link_min_confidence: float = 0.8
    link_class_depth: int = 4
    #: A remote SPARQL 1.1 query URL holding the KB's triples instead of the embedded store (indexes stay
    #: local; see kqe_rdf/kb/store.py), and seconds per request to it. Empty: the embedded Oxigraph store.
    store_endpoint: str = ""
    store_timeout: float = 60.0
    #: Query expansion (`kqe-rdf expand`, methods kar*, hyde, q2d, rar, agr, prf-docs, lkqe*).
    #: KAR: hops of relation propagation (1 or 2; the second hop grows only from the best first-hop
    #: neighbours), neighbours kept by document-based filtering, expansions the LLM writes, and the
    #: final retriever over the expanded query ("dense", "bm25" or "hybrid"; bm25 when the KB has no embeddings).
    kar_hops: int = 1
    kar_neighbours: int = 10
    kar_expansions: int = 3
    #: KAR offline: passages appended, one per best neighbour (its facts, then its document's sentence nearest
    #: the request). One: the final retriever reads the likeliest neighbour's whole passage (phenopackets dev,
    #: hybrid final: 31.18 Hit@1 with one, 28.85 with three; docs/results.md).
    kar_passages: int = 1
    #: Longest request `expand` takes (characters): a pasted document is not a query.
    expand_max_chars: int = 10_000
    kar_final: str = "hybrid"
    #: KAR's document-based filtering: neighbours' documents scored by the encoder ("dense") or by the encoder
    #: and BM25 fused by reciprocal rank ("hybrid": on a phenotype list the encoder alone ranks the right
    #: disease first for 6% of cases, BM25 for 19%; with it offline KAR keeps the reading's first answer more).
    kar_filter: str = "hybrid"
    #: KAR: neighbours fetched per node, relation and hop (the SPARQL LIMIT that keeps hubs fast), and
    #: documents encoded per query for neighbours the KB holds no embedding of (the rest go unscored).
    kar_fanout: int = 1000
    kar_encode: int = 32
    #: KAR: tokens of a document encoded on the fly (the stored embeddings keep embedding_max_tokens).
    kar_encode_tokens: int = 128
    #: kar-namefilter: a hop that reaches more than `kar_name_hub` names (a hub term: Seizure leads to 3,800
    #: diseases, 20 s of encoding) scores only `kar_encode_names` of them, those whose names share most words
    #: with the request, then whose documents BM25 ranks first for it; smaller hops are scored whole.
    kar_name_hub: int = 400
    kar_encode_names: int = 128
    #: KAR: nodes each entity resolves to, nodes the query itself (a pseudo-entity) resolves to by the
    #: final retriever, and entities taken from a query at most.
    kar_entity_nodes: int = 1
    kar_query_nodes: int = 1
    kar_max_entities: int = 12
    #: KAR offline: take the entities and the facts from the structural reader's grounded reading when it has
    #: one (the nodes its paths reach, with the facts along them); False: every neighbour of the linked names.
    kar_grounded: bool = True
    #: Tokens (about 4 characters each) of knowledge an expansion may use: KAR's document triples, the
    #: passages of PRF and RAR; and completion tokens per expansion call of the LLM.
    expansion_context_tokens: int = 600
    expansion_max_tokens: int = 256
    #: Passages PRF, RAR and AGR read (top of the final retriever on the unexpanded query).
    expansion_docs: int = 3
    #: LKQE: BM25 passages read, key sentences kept, expansion length at most this many times the query's
    #: words, times the query is repeated in the final BM25 query, and whether per-query triples are stored
    #: as named graphs in <kb>/expansions/.
    lkqe_docs: int = 8
    lkqe_sentences: int = 5
    lkqe_max_ratio: int = 15
    lkqe_query_repeat: int = 3
    lkqe_store: bool = True
    #: Question answering (`kqe-rdf ask`, `/answer`): the sources used by default (comma-separated subset
    #: of kg,text,tables), BM25 pool size, the pruning stages after it (comma-separated, each smaller), and
    #: the weights of BM25, dense similarity and entity overlap in each stage's fusion. Dense similarity is
    #: computed once at most qa_dense_depth pieces remain (encoding costs about 4 ms per sentence on 2 cores).
    qa_sources: str = "kg,text,tables"
    qa_pool_size: int = 1000
    qa_prune_stages: str = "100,30"
    qa_bm25_weight: float = 1.0
    qa_dense_weight: float = 1.0
    qa_entity_weight: float = 1.0
    #: ... and of answer-type match (a piece names an entity of the question's answer type).
    qa_type_weight: float = 1.0
    qa_dense_depth: int = 100
    #: KG evidence: edges walked from the question's entities, nodes the walk goes on from per hop (those of
    #: the best-fitting facts), and facts read per node (keeps hubs such as "Drama" from flooding the pool).
    qa_kg_hops: int = 3
    qa_expand_nodes: int = 30
    qa_facts_per_node: int = 100
    #: Text and table evidence: the best BM25 sentences of the whole KB, and table rows, added per question.
    qa_text_hits: int = 100
    qa_table_hits: int = 100
    #: Structural candidates (part of the kg source): the top qa_focus_hits 4StepFocus hits per question become
    #: evidence (0: none), and qa_focus_weight weighs their structural score in pruning and in the offline reader.
    qa_focus_hits: int = 10
    qa_focus_weight: float = 1.0
    #: When the structural reader has a grounded reading of the question (and the kg source is used), the answer
    #: is 4StepFocus's first (offline reading, as 4step-offline), cited with its KG path; qa_grounded_depth of
    #: its ranked answers are the candidates. False: every answer is read from the pruned evidence.
    qa_grounded: bool = True
    qa_grounded_depth: int = 10
    #: The most answers `ask` lists for a list question ("which films did X act in"): every node a reading's
    #: paths reach equally well, up to this many.
    qa_max_answers: int = 1000

    def __post_init__(self) -> None:
        # Checked here, not where a value is first used, so a bad value fails before a long build starts.
        for name in ("k", "doc_neighbours_per_relation", "doc_max_chars", "embedding_max_tokens",
                     "embedding_batch_size", "dense_ann_threshold", "dense_ann_ef_search", "hybrid_depth", "prf_docs", "prf_terms", "server_max_query_chars",
                     "server_max_query_depth", "server_max_query_negations", "server_max_query_logical_operators",
                     "server_max_query_arithmetic_operators", "server_max_query_patterns"):
            if getattr(self, name) < 1:
                raise KqeError(f"setting {name} must be at least 1, got {getattr(self, name)!r}")
        if self.embedding_pooling not in ("mean", "cls"):
            raise KqeError(f"setting embedding_pooling must be 'mean' or 'cls', got {self.embedding_pooling!r}")
        if self.embedding_dimension < 0:
            raise KqeError(f"setting embedding_dimension must not be negative, got {self.embedding_dimension!r}")
        if self.rrf_k < 0:
            raise KqeError(f"setting rrf_k must not be negative, got {self.rrf_k!r}")
        if not 0.0 <= self.prf_original_weight <= 1.0:
            raise KqeError(f"setting prf_original_weight must be between 0 and 1, got {self.prf_original_weight!r}")
        for name in ("link_retries", "link_class_depth"):
            if getattr(self, name) < 0:
                raise KqeError(f"setting {name} must not be negative, got {getattr(self, name)!r}")
        if not self.link_timeout > 0:
            raise KqeError(f"setting link_timeout must be a positive number of seconds, got {self.link_timeout!r}")
        if self.on_unknown_edge not in ("skip", "fail"):
            raise KqeError(f"setting on_unknown_edge must be 'skip' or 'fail', got {self.on_unknown_edge!r}")
        for name in ("llm_max_retries", "llm_max_output_tokens", "llm_max_calls_per_query",
                     "llm_max_tokens_per_query", "llm_backoff"):
            if getattr(self, name) < 0:
                raise KqeError(f"setting {name} must not be negative, got {getattr(self, name)!r}")
        if not self.llm_timeout > 0:
            raise KqeError(f"setting llm_timeout must be a positive number of seconds, got {self.llm_timeout!r}")
        if not 0.0 <= self.llm_temperature <= 2.0:
            raise KqeError(f"setting llm_temperature must be between 0 and 2, got {self.llm_temperature!r}")
        if self.llm_base_url and not self.llm_base_url.startswith(("http://", "https://")):
            raise KqeError(f"setting llm_base_url must be an http(s) URL such as http://localhost:8000/v1, "
                           f"got {self.llm_base_url!r}")
        for name in ("expand_max_chars", "kar_neighbours", "kar_expansions", "kar_passages", "kar_fanout", "kar_entity_nodes", "kar_max_entities",
                     "kar_encode_tokens",
                     "expansion_context_tokens", "expansion_max_tokens", "lkqe_docs", "lkqe_sentences",
                     "lkqe_max_ratio", "lkqe_query_repeat"):
            if getattr(self, name) < 1:
                raise KqeError(f"setting {name} must be at least 1, got {getattr(self, name)!r}")
        for name in ("kar_encode", "kar_query_nodes", "expansion_docs", "kar_encode_names", "kar_name_hub"):
            if getattr(self, name) < 0:
                raise KqeError(f"setting {name} must not be negative, got {getattr(self, name)!r}")
        if self.kar_hops not in (1, 2):
            raise KqeError(f"setting kar_hops must be 1 or 2, got {self.kar_hops!r}")
        if self.fourstep_negated not in ("context", "cost", "ignore"):
            raise KqeError(f"setting fourstep_negated must be 'context', 'cost' or 'ignore', got {self.fourstep_negated!r}")
        if self.fourstep_matcher not in ("hierarchy", "exact"):
            raise KqeError(f"setting fourstep_matcher must be 'hierarchy' or 'exact', got {self.fourstep_matcher!r}")
        if not self.fourstep_ic_power > 0:
            raise KqeError(f"setting fourstep_ic_power must be positive, got {self.fourstep_ic_power!r}")
        for name in ("fourstep_text_weight", "fourstep_negated_weight"):
            if not getattr(self, name) >= 0:
                raise KqeError(f"setting {name} must not be negative, got {getattr(self, name)!r}")
        if self.kar_filter not in ("dense", "hybrid"):
            raise KqeError(f"setting kar_filter must be 'dense' or 'hybrid', got {self.kar_filter!r}")
        if self.kar_final not in ("dense", "bm25", "hybrid"):
            raise KqeError(f"setting kar_final must be 'dense', 'bm25' or 'hybrid', got {self.kar_final!r}")
        for name in ("qa_pool_size", "qa_kg_hops", "qa_expand_nodes", "qa_facts_per_node", "qa_grounded_depth",
                     "qa_max_answers"):
            if getattr(self, name) < 1:
                raise KqeError(f"setting {name} must be at least 1, got {getattr(self, name)!r}")
        for name in ("qa_bm25_weight", "qa_dense_weight", "qa_entity_weight", "qa_type_weight", "qa_dense_depth",
                     "qa_text_hits", "qa_table_hits"):
            if getattr(self, name) < 0:
                raise KqeError(f"setting {name} must not be negative, got {getattr(self, name)!r}")
        unknown = set(self.qa_source_list) - {"kg", "text", "tables"}
        if unknown or not self.qa_source_list:
            raise KqeError(f"setting qa_sources must name some of kg, text, tables; got {self.qa_sources!r}")
        stages = self.qa_stages
        if any(b >= a for a, b in zip([self.qa_pool_size, *stages], stages)) or any(k < 1 for k in stages):
            raise KqeError(f"setting qa_prune_stages must be positive sizes, each smaller than the one before and "
                           f"than qa_pool_size ({self.qa_pool_size}), e.g. '100,30'; got {self.qa_prune_stages!r}")
        for name in ("qa_focus_hits", "qa_focus_weight"):
            if getattr(self, name) < 0:
                raise KqeError(f"setting {name} must not be negative, got {getattr(self, name)!r}")

    @property
    def qa_source_list(self) -> tuple[str, ...]:
        """``qa_sources`` as a tuple, e.g. ("kg", "text")."""
        return tuple(s.strip() for s in self.qa_sources.split(",") if s.strip())

    @property
    def qa_stages(self) -> tuple[int, ...]:
        """``qa_prune_stages`` as sizes, e.g. (100, 30)."""
        try:
            return tuple(int(k) for k in self.qa_prune_stages.split(",") if k.strip())
        except ValueError:
            raise KqeError(f"setting qa_prune_stages must be comma-separated sizes such as '100,30', "
                           f"got {self.qa_prune_stages!r}") from None

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
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise KqeError(f"{path}: not valid TOML ({exc})") from None
            section = data.get("kqe-rdf", data)
            if not isinstance(section, dict):
                raise KqeError(f"{path}: [kqe-rdf] must be a table of settings")
            values.update(section)
        for f in fields(cls):
            key = f"KQE_{f.name.upper()}"
            if key in env:
                values[f.name] = env[key]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls._coerce(values)

    @classmethod
    def _coerce(cls, values: Mapping[str, object]) -> Settings:
        known = {f.name: f for f in fields(cls)}
        out: dict[str, object] = {}
        defaults = cls()
        for name, value in values.items():
            if name not in known:
                raise KqeError(f"unknown setting {name!r}; known: {', '.join(sorted(known))}")
            kind = type(getattr(defaults, name))
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
        return dataclasses.replace(defaults, **out)


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
