"""Evaluation query sets: questions with gold answers written in the KB's source ids.

Every loader returns a :class:`QuerySet` whose ``skipped`` counts say why
queries were left out, so nothing is dropped silently, and raises
:class:`~kqe_rdf.core.errors.InputError` naming ``file:line`` on malformed input.
``limit`` stops after that many loaded queries (counts cover what was read).
Loaders are selected by name through :data:`LOADERS` or :func:`load`.
"""

from __future__ import annotations

import ast
import hashlib
import csv
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..core.errors import InputError
from ..kb.importers.reading import parse_json
from .metrics import normalise_qrels, read_trec_qrels, source_lines


class EvalQuery(NamedTuple):
    """One question; ``answers`` maps gold source ids to graded relevance.

    ``topic`` is the entity a benchmark marks in the question (MetaQA), kept
    apart so the text is what a user would type. ``facets`` name the kinds a
    query belongs to where the set has kinds (MetaQA: ``{"hops": "2-hop",
    "template": "what movies did E act in"}``), so a report can break scores down by them.
    """

    qid: str
    text: str
    answers: dict[str, int]
    topic: str | None = None
    facets: dict[str, str] | None = None


@dataclass
class QuerySet:
    """Loaded queries plus, per reason, how many were skipped."""

    name: str
    queries: list[EvalQuery] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    #: Gold answers are written as names (MetaQA, IRN): one no node has as its id is looked up by exact name.
    answers_are_names: bool = False
    _seen: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[EvalQuery]:
        return iter(self.queries)

    def check_new(self, qid: str, where: str) -> None:
        """A query id given twice would merge two queries' results; refuse it where it comes again."""
        first = self._seen.setdefault(qid, where)
        if first != where:
            raise InputError(f"query id {qid!r} again (first at {first}); every query needs its own id", where)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def full(self, limit: int | None) -> bool:
        return limit is not None and len(self.queries) >= limit

    def qrels(self) -> dict[str, dict[str, int]]:
        """Gold answers as ``{qid: {doc_id: relevance}}``, ready for :mod:`kqe_rdf.evaluation.metrics`."""
        return {q.qid: dict(q.answers) for q in self.queries}

    def half(self, which: int) -> QuerySet:
        """Half 1 or 2 of the queries, by the parity of their id's sha256: the same split on every machine and
        in every order, for fitting on one half and measuring on the other (``--half``)."""
        if which not in (1, 2):
            raise InputError(f"half {which}: there are halves 1 and 2", self.name)
        kept = [q for q in self.queries
                if hashlib.sha256(q.qid.encode("utf-8")).digest()[-1] % 2 == which - 1]
        return QuerySet(f"{self.name} (half {which} of 2, by sha256 of the query id)", kept, dict(self.skipped),
                        self.answers_are_names)

    def summary(self) -> str:
        skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items())) or "none"
        return f"{self.name}: {len(self.queries)} queries loaded; skipped: {skipped}"


def _csv_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str]]]:
    """("file:line", row) for each CSV record; checks the header names ``required``."""
    name, lines = source_lines(Path(path))
    reader = csv.DictReader(io.StringIO("\n".join(lines) + "\n"))
    try:
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise InputError(f"CSV header lacks column(s) {', '.join(missing)}; found {', '.join(header)}", f"{name}:1")
        for row in reader:
            where = f"{name}:{reader.line_num}"
            if None in row or any(value is None for value in row.values()):
                found = sum(k is not None and v is not None for k, v in row.items()) + len(row.get(None) or [])
                raise InputError(f"expected {len(header)} columns ({','.join(header)}), found {found}", where)
            yield where, row
    except csv.Error as exc:
        raise InputError(f"malformed CSV ({exc})", f"{name}:{reader.line_num}") from None


# ---------------------------------------------------------------- STaRK


def load_stark(path: Path, split_index: Path | None = None, limit: int | None = None) -> QuerySet:
    """STaRK QA CSV (``id,query,answer_ids``), optionally only the ids in a ``split/*.index`` file."""
    wanted: set[str] | None = None
    if split_index is not None:
        wanted = {line.strip() for line in source_lines(Path(split_index))[1] if line.strip()}
    result = QuerySet("stark")
    found: set[str] = set()
    for where, row in _csv_rows(path, ("id", "query", "answer_ids")):
        if result.full(limit):
            return result
        qid = row["id"].strip()
        if wanted is not None and qid not in wanted:
            result.skip("not in split")
            continue
        result.check_new(qid, where)
        found.add(qid)
        try:
            answer_ids = ast.literal_eval(row["answer_ids"])
        except (ValueError, SyntaxError):
            shown = row["answer_ids"][:60]
            raise InputError(f"answer_ids {shown!r} is not a list literal such as [12, 34]", where) from None
        if not isinstance(answer_ids, (list, tuple)):
            raise InputError(f"answer_ids must be a list, found {type(answer_ids).__name__}", where)
        if not row["query"].strip():
            result.skip("empty query text")
        elif not answer_ids:
            result.skip("no answers")
        else:
            result.queries.append(EvalQuery(qid, row["query"].strip(), {str(a): 1 for a in answer_ids}))
    if wanted is not None and wanted - found:
        result.skipped["split ids not in the CSV"] = len(wanted - found)
    return result


# ---------------------------------------------------------------- TREC


def load_trec(topics: Path, qrels: Path, limit: int | None = None) -> QuerySet:
    """TREC topics TSV (``qid<TAB>text``) with graded qrels; unjudged topics are skipped."""
    judged = normalise_qrels(read_trec_qrels(Path(qrels)))
    result = QuerySet("trec")
    name, lines = source_lines(Path(topics))
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if result.full(limit):
            return result
        if not line.strip():
            continue
        qid, tab, text = line.partition("\t")
        if not tab or not qid.strip() or not text.strip():
            raise InputError("expected 'qid<TAB>query text'", f"{name}:{number}")
        qid = qid.strip()
        result.check_new(qid, f"{name}:{number}")
        seen.add(qid)
        if qid not in judged:
            result.skip("no judgments")
            continue
        result.queries.append(EvalQuery(qid, text.strip(), judged[qid]))
    if set(judged) - seen:
        result.skipped["judged qids without a topic"] = len(set(judged) - seen)
    return result


# ---------------------------------------------------------------- MetaQA

_TOPIC = re.compile(r"\[([^\[\]]+)\]")
_HOP = re.compile(r"(\d+)-?hop")


def load_metaqa(*paths: Path, limit: int | None = None) -> QuerySet:
    """MetaQA ``question with [topic]<TAB>a1|a2`` lines, one set from several files; facets: hops, template."""
    # The brackets are removed and the topic kept apart; a query's hop count comes from its folder name
    # (``2-hop/dev.txt.gz``), its template is the question with the topic replaced by ``E``.
    if not paths:
        raise InputError("metaqa needs at least one questions file")
    hops = [next((f"{m.group(1)}-hop" for part in reversed(Path(p).parts) if (m := _HOP.search(part))), None)
            for p in paths]
    labels = [hop or Path(path).name for hop, path in zip(hops, paths)]
    result = QuerySet("metaqa" if hops == [None] else "metaqa " + " + ".join(labels), answers_are_names=True)
    for path, hop, label in zip(paths, hops, labels):
        name, lines = source_lines(Path(path))
        for number, line in enumerate(lines, start=1):
            if result.full(limit):
                return result
            if not line.strip():
                continue
            question, tab, answer_text = line.partition("\t")
            if not tab or not question.strip():
                raise InputError("expected 'question with [topic entity]<TAB>answer1|answer2'", f"{name}:{number}")
            match = _TOPIC.search(question)
            text = " ".join(question.replace("[", "").replace("]", "").split())
            answers = {a.strip(): 1 for a in answer_text.split("|") if a.strip()}
            if not answers:
                result.skip("no answers")
                continue
            qid = str(number) if hops == [None] else f"{label}-{number}"
            facets = {"template": " ".join(_TOPIC.sub("E", question).split())}
            if hop:
                facets = {"hops": hop, **facets}
            result.queries.append(EvalQuery(qid, text, answers, match.group(1).strip() if match else None, facets))
    return result


#: PathQuestion's answer column: the first answer, then every answer in parentheses ("Male(Male/)").
_PATHQUESTION_ANSWERS = re.compile(r"^(.*?)\((.*)\)\s*$", re.S)


def _irn_answers(columns: list[str]) -> dict[str, int]:
    """The gold answers of an IRN line in either layout: WC2014's four columns
    (``question<TAB>answer<TAB>path<TAB>a1/a2/...``) or PathQuestion's three (``question<TAB>answer(a1/a2/)<TAB>path``).

    >>> _irn_answers(["q", "Male(Male/)", "p"])
    {'Male': 1}
    >>> _irn_answers(["q", "a", "p", "a/b/"])
    {'a': 1, 'b': 1}
    """
    listed = columns[3] if len(columns) >= 4 else ""
    first = columns[1].strip()
    if not listed.strip() and (match := _PATHQUESTION_ANSWERS.match(first)):
        first, listed = match.group(1).strip(), match.group(2)
    answers = {a.strip(): 1 for a in listed.split("/") if a.strip()}
    return answers or ({first: 1} if first else {})


def load_irn(*paths: Path, limit: int | None = None) -> QuerySet:
    """IRN lines (WC2014's or PathQuestion's layout); every listed answer counts; facets: path, relations."""
    # IRN (Zhou et al. 2018: PathQuestion, WC2014); more columns may follow. The gold path (``h#r#t#...``, several
    # joined by ``*`` for constraints on one answer) is for reports only, never shown to a method.
    if not paths:
        raise InputError("irn needs at least one questions file")
    result = QuerySet("irn " + " + ".join(Path(p).name for p in paths), answers_are_names=True)
    for path in paths:
        name, lines = source_lines(Path(path))
        stem = Path(path).name.split(".")[0]
        for number, line in enumerate(lines, start=1):
            if result.full(limit):
                return result
            if not line.strip():
                continue
            columns = line.rstrip("\r\n").split("\t")
            where = f"{name}:{number}"
            if len(columns) < 3 or not columns[0].strip():
                raise InputError("expected 'question<TAB>answer<TAB>path<TAB>answer1/answer2/...' (WC2014) or "
                                 "'question<TAB>answer(answer1/answer2/)<TAB>path' (PathQuestion)", where)
            answers = _irn_answers(columns)
            if not answers:
                result.skip("no answers")
                continue
            chains = [c for c in columns[2].split("*") if c.strip()]
            relations = [r for chain in chains for r in chain.split("#")[1::2] if r and r != "<end>"]
            facets = {"path": " / ".join(relations), "relations": f"{len(relations)}-relation"}
            if len(chains) > 1:
                facets["constraints"] = f"{len(chains)} constraints"
            qid = f"{stem}-{number}" if len(paths) > 1 else str(number)
            result.check_new(qid, where)
            text = " ".join(columns[0].split())
            result.queries.append(EvalQuery(qid, text, answers, None, facets))
    return result


# ---------------------------------------------------------------- phenopackets

#: At most this many excluded phenotypes are listed, so long negative lists do not swamp the question.
MAX_EXCLUDED = 20
_SUBJECT = {"FEMALE": "A female patient", "MALE": "A male patient"}


def _label(term: object, where: str) -> str:
    """The label of an ``[HP id, label]`` pair, lower-cased unless it starts with an acronym."""
    if not (isinstance(term, list) and len(term) == 2 and all(isinstance(t, str) for t in term)):
        raise InputError(f"phenotype {term!r} is not an [id, label] pair", where)
    label = term[1].strip() or term[0]
    return label if label[1:2].isupper() else label[:1].lower() + label[1:]


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


#: How a case can be worded: the evaluation's template (observed and excluded phenotypes), three ways a user
#: types the observed phenotypes alone, and the observed and excluded ones in one line as clinicians write them
#: (:data:`NEGATED_WORDINGS`: a negation whose scope is one clause). The structural reader is measured on each, so
#: no wording is learned.
NEGATED_WORDINGS = {
    "semicolon": "{observed}; no {excluded_or}",
    "but": "{observed} but no {excluded_or}",
    "without": "{observed}, without {excluded_or}",
    "denies": "{observed}; denies {excluded_or}",
    "negative": "{observed}, negative for {excluded_and}",
    "ruled": "{observed}; {excluded_and} ruled out",
    "first": "no {excluded_or}, but has {observed}",
}
WORDINGS = ("template", "list", "which", "child", *NEGATED_WORDINGS)


def phenopacket_question(sex: str | None, observed: list[str], excluded: list[str], target: str = "disease",
                         wording: str = "template") -> str:
    """A case as one request, in one of :data:`WORDINGS`; every method sees the same text.

    >>> phenopacket_question("FEMALE", ["a", "b"], ["c"])
    'A female patient presents with a and b. C was not observed. Which disease explains this?'
    >>> [phenopacket_question(None, ["a", "b", "c"], ["d"], wording=w) for w in WORDINGS[1:4]]
    ['a, b and c', 'which disease causes a, b and c?', 'child with a, b and c']
    >>> [phenopacket_question(None, ["a", "b"], ["c", "d"], wording=w) for w in ("semicolon", "negative", "first")]
    ['a and b; no c or d', 'a and b, negative for c and d', 'no c or d, but has a and b']
    """
    observed_text = _join(observed)
    if wording in NEGATED_WORDINGS:
        shown = excluded[:MAX_EXCLUDED]
        if not shown:
            return observed_text  # nothing excluded: the plain list
        return NEGATED_WORDINGS[wording].format(observed=observed_text, excluded_and=_join(shown),
                                                excluded_or=_join(shown).rsplit(" and ", 1)[0] + (
                                                    f" or {shown[-1]}" if len(shown) > 1 else ""))
    if wording == "list":
        return observed_text
    if wording == "which":
        return f"which {target} causes {observed_text}?"
    if wording == "child":
        return f"child with {observed_text}"
    if wording != "template":
        raise InputError(f"unknown wording {wording!r}; one of {', '.join(WORDINGS)}")
    text = f"{_SUBJECT.get(sex or '', 'A patient')} presents with {observed_text}."
    if excluded:
        shown = excluded[:MAX_EXCLUDED]
        negated = _join(shown)
        text += f" {negated[:1].upper()}{negated[1:]} {'was' if len(shown) == 1 else 'were'} not observed."
    return f"{text} Which {target} explains this?"


def _size_bucket(n: int) -> str:
    """How long a case's phenotype list is, in the few buckets a report breaks scores down by."""
    return next(f"{lo}-{hi}" for lo, hi in ((1, 4), (5, 9), (10, 19)) if n <= hi) if n < 20 else "20+"


def load_phenopackets(path: Path, target: str = "disease", limit: int | None = None,
                      wording: str = "template") -> QuerySet:
    """Phenopacket JSON lines; answers are disease ids or gene symbols; questions worded as :data:`WORDINGS` say."""
    if target not in ("disease", "gene"):
        raise InputError(f"target must be 'disease' or 'gene', not {target!r}")
    if wording not in WORDINGS:
        raise InputError(f"unknown wording {wording!r}; one of {', '.join(WORDINGS)}")
    result = QuerySet(f"phenopackets {target}" + ("" if wording == "template" else f", wording '{wording}'"))
    name, lines = source_lines(Path(path))
    for number, line in enumerate(lines, start=1):
        if result.full(limit):
            break
        if not line.strip():
            continue
        where = f"{name}:{number}"
        case = parse_json(line, where)
        if not isinstance(case, dict) or not isinstance(case.get("id"), str):
            raise InputError("each line must be a JSON object with a string 'id'", where)
        result.check_new(case["id"], where)
        lists = {key: case.get(key) or [] for key in ("observed", "excluded", "diseases", "genes")}
        for key, value in lists.items():
            if not isinstance(value, list):
                raise InputError(f"field {key!r} must be a list of [id, label] pairs", where)
        observed = [_label(t, where) for t in lists["observed"]]
        excluded = [_label(t, where) for t in lists["excluded"]]
        pairs = lists["diseases"] if target == "disease" else lists["genes"]
        if any(not (isinstance(p, list) and len(p) == 2) for p in pairs):
            raise InputError(f"field {target + 's'!r} must hold [id, name] pairs", where)
        answers = {str(p[0] if target == "disease" else p[1]): 1 for p in pairs}
        if not observed:
            result.skip("no observed phenotypes")
        elif not answers:
            result.skip(f"no {target}")
        else:
            question = phenopacket_question(case.get("sex"), observed, excluded, target, wording)
            result.queries.append(EvalQuery(case["id"], question, answers,
                                            facets={"observed terms": _size_bucket(len(observed))}))
    return result


# ---------------------------------------------------------------- SciFact


def load_scifact(claims: Path, qrels: Path, limit: int | None = None) -> QuerySet:
    """SciFact claims CSV (one row per evidence, same ``id``) with answers from TREC qrels."""
    judged = normalise_qrels(read_trec_qrels(Path(qrels)))
    result = QuerySet("scifact")
    seen: set[str] = set()
    for _where, row in _csv_rows(claims, ("id", "claim")):
        if result.full(limit):
            break
        qid = row["id"].strip()
        if qid in seen:
            continue
        seen.add(qid)
        if qid not in judged:
            result.skip("no qrels")
        elif not row["claim"].strip():
            result.skip("empty claim")
        else:
            result.queries.append(EvalQuery(qid, row["claim"].strip(), judged[qid]))
    return result


LOADERS: dict[str, Callable[..., QuerySet]] = {
    "stark": load_stark,
    "trec": load_trec,
    "metaqa": load_metaqa,
    "irn": load_irn,
    "phenopackets": load_phenopackets,
    "scifact": load_scifact,
}


def load(name: str, *paths: Path, limit: int | None = None, **options: object) -> QuerySet:
    """The query set a named loader reads from ``paths``."""
    try:
        loader = LOADERS[name]
    except KeyError:
        raise InputError(f"no query set loader named {name!r}; available: {', '.join(sorted(LOADERS))}") from None
    return loader(*paths, limit=limit, **options)
