"""Every query-expansion prompt, in one place, adapted from the papers' appendices.

KAR (Xia et al. 2024, "Knowledge-Aware Query Expansion with Large Language Models
for Textual and Relational Retrieval"), HyDE (Gao et al. 2023), Query2doc (Wang et
al. 2023), RAR — generation grounded on retrieved documents (Shen et al. 2023,
LameR) — AGR (Chen et al. 2024, analyze, generate, refine) and LKQE (KG-guided
expansion: key sentences, triples, completion, expansion). The schema text comes
from the ontology (:meth:`Schema.describe_for_prompt`); nothing here names a domain.
Structured answers come with a JSON schema (``*_SCHEMA``) that :meth:`LLM.json` enforces.
"""

from __future__ import annotations

from ...llm.prompts import DATA_RULE, data

Messages = list[dict[str, str]]
#: The prompts that show passages (user messages only) open with the rule that passages are data.
_RULE = DATA_RULE.replace("{", "{{").replace("}", "}}") + "\n\n"


def _chat(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def numbered(passages: list[str]) -> str:
    """Passages as numbered ``<data>`` blocks (:func:`kqe_rdf.llm.prompts.data`)."""
    return "\n\n".join(f"[{i + 1}] {data(p)}" for i, p in enumerate(passages))


# KAR.

ENTITIES_SCHEMA = {"type": "object", "required": ["entities"], "properties": {"entities": {
    "type": "array", "items": {"type": "object", "required": ["name"],
                               "properties": {"name": {"type": "string"}, "type": {"type": ["string", "null"]}}}}}}

ENTITIES_SYSTEM = """You find the entities a search query mentions, so they can be looked up in a knowledge base.
The knowledge base's document structure:
{schema}

Return JSON: {{"entities": [{{"name": <the entity as the query writes it>, "type": <one node type above or null>}}]}}
List only entities the query names explicitly (people, things, terms, conditions), not what it asks for."""

EXPANSIONS_SCHEMA = {"type": "object", "required": ["expansions"],
                     "properties": {"expansions": {"type": "array", "items": {"type": "string"}}}}

KAR_SYSTEM = """You help a search engine by expanding a query with knowledge.
You get the query and knowledge as document triples (document of an entity, relation, document of a related
entity) from a knowledge base. Write {n} short passages (one to three sentences each) that could be part of a
document answering the query, using the knowledge where it is relevant and ignoring it where it is not.
Return JSON: {{"expansions": [<passage>, ...]}}
""" + _RULE.rstrip()

KAR_USER = """Query: {query}

Knowledge:
{knowledge}"""


def entity_messages(schema_text: str, query: str) -> Messages:
    return _chat(ENTITIES_SYSTEM.format(schema=schema_text), f"Query: {query}")


def kar_messages(query: str, knowledge: str, n: int) -> Messages:
    return _chat(KAR_SYSTEM.format(n=n), KAR_USER.format(query=query, knowledge=data(knowledge) if knowledge
                                                          else "(none found)"))


# Baselines.

HYDE_USER = "Please write a passage to answer the question.\nQuestion: {query}\nPassage:"

Q2D_USER = "Write a passage that answers the given query:\nQuery: {query}\nPassage:"

RAR_USER = _RULE + """Give a passage that answers the question, using the candidate passages below where they help.
Candidate passages:
{passages}

Question: {query}
Passage:"""

AGR_ANALYZE = """Analyze the question: what does it ask for, and which pieces of information are needed to
answer it? List the information needs briefly, one per line.
Question: {query}"""

AGR_GENERATE = _RULE + """Question: {query}
Information needed:
{analysis}

Candidate passages:
{passages}

For each information need, write what the answer is likely to be, in one or two sentences."""

AGR_REFINE = """Question: {query}
Draft answers:
{draft}

Refine the drafts into one passage that answers the question: keep what is consistent and relevant,
drop what is doubtful or off topic. Write only the passage."""


def hyde_messages(query: str) -> Messages:
    return [{"role": "user", "content": HYDE_USER.format(query=query)}]


def q2d_messages(query: str) -> Messages:
    return [{"role": "user", "content": Q2D_USER.format(query=query)}]


def rar_messages(query: str, passages: list[str]) -> Messages:
    return [{"role": "user", "content": RAR_USER.format(query=query, passages=numbered(passages))}]


def agr_analyze_messages(query: str) -> Messages:
    return [{"role": "user", "content": AGR_ANALYZE.format(query=query)}]


def agr_generate_messages(query: str, analysis: str, passages: list[str]) -> Messages:
    return [{"role": "user", "content": AGR_GENERATE.format(query=query, analysis=analysis,
                                                             passages=numbered(passages))}]


def agr_refine_messages(query: str, draft: str) -> Messages:
    return [{"role": "user", "content": AGR_REFINE.format(query=query, draft=draft)}]


# LKQE.

SENTENCES_SCHEMA = {"type": "object", "required": ["sentences"], "properties": {"sentences": {
    "type": "array", "items": {"type": "object", "required": ["passage", "sentence"],
                               "properties": {"passage": {"type": "integer"}, "sentence": {"type": "string"}}}}}}

TRIPLES_SCHEMA = {"type": "object", "required": ["triples"], "properties": {"triples": {
    "type": "array", "items": {"type": "object", "required": ["head", "relation", "tail"],
                               "properties": {"head": {"type": "string"}, "relation": {"type": "string"},
                                              "tail": {"type": "string"}, "passage": {"type": "integer"}}}}}}

LKQE_SENTENCES = _RULE + """Query: {query}

Passages:
{passages}

Extract the key sentences of these passages: the ones that carry information relevant to the query.
Copy them as they are. Return JSON: {{"sentences": [{{"passage": <passage number>, "sentence": <text>}}]}}"""

LKQE_TRIPLES = _RULE + """Query: {query}

Key sentences (with the number of the passage each comes from):
{sentences}

Extract the knowledge in these sentences as (head, relation, tail) triples of short phrases.
Return JSON: {{"triples": [{{"head": ..., "relation": ..., "tail": ..., "passage": <passage number>}}]}}"""

LKQE_COMPLETE = _RULE + """Query: {query}

Knowledge graph (head | relation | tail):
{triples}

Complete this knowledge graph for the query: add the triples that are missing to answer it (facts you
are confident of). Return JSON with only the new triples: {{"triples": [{{"head": ..., "relation": ..., "tail": ...}}]}}"""

LKQE_EXPAND = _RULE + """Query: {query}

Knowledge graph (head | relation | tail):
{triples}

Using this knowledge, write a short passage that answers the query. Write only the passage."""


def render_triples(triples: list[dict]) -> str:
    """Triples read from passages, one per line, as a ``<data>`` block (they carry the passages' words)."""
    return data("\n".join(f"{t['head']} | {t['relation']} | {t['tail']}" for t in triples)) if triples \
        else "(empty)"


def lkqe_sentence_messages(query: str, passages: list[str]) -> Messages:
    return [{"role": "user", "content": LKQE_SENTENCES.format(query=query, passages=numbered(passages))}]


def lkqe_triple_messages(query: str, sentences: list[tuple[int, str]]) -> Messages:
    shown = "\n".join(f"[{p}] {data(s)}" for p, s in sentences)
    return [{"role": "user", "content": LKQE_TRIPLES.format(query=query, sentences=shown)}]


def lkqe_complete_messages(query: str, triples: list[dict]) -> Messages:
    return [{"role": "user", "content": LKQE_COMPLETE.format(query=query, triples=render_triples(triples))}]


def lkqe_expand_messages(query: str, triples: list[dict]) -> Messages:
    return [{"role": "user", "content": LKQE_EXPAND.format(query=query, triples=render_triples(triples))}]
