"""Amazon Review Data 2018 → a STaRK-Amazon-like product graph.

Sources: folders holding ``meta_<Category>.json.gz`` files (all of them are
read) or such files themselves; the 5-core reviews ``<Category>_5.json.gz``
beside a meta file are read when present. Lines are JSON objects; some Amazon
2018 releases write Python dict literals instead, which are accepted too.

Nodes: Product (id = ASIN, name = title, fields description, features, price,
average rating and at most ``reviews`` customer reviews, default 5: the most
helpful by votes, then the longest, each cut at ``review_chars`` characters,
default 1,000), Brand (id ``brand:<name>``) and Category (id
``category:<name>``). Edges: hasBrand, hasCategory (every category on the
product's path), subcategoryOf (between consecutive path entries), alsoBought
and alsoViewed (to products outside the KB they are skipped and counted by the
writer).

Repairs of known defects of the 2018 files, each counted in ``stats`` and
reported by one summary warning: HTML markup and entities are removed from
text; a title that is only markup (most Magazine_Subscriptions products) is
replaced by the brand and the start of the description; sentence-like
entries of the category list (Gift_Cards lists features there) are moved to
the features; prices that are not amounts (CSS fragments) are dropped; a
product listed again under the same ASIN is skipped.
"""

from __future__ import annotations

import ast
import html
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import InputError, KqeError
from ..records import Edge, ImportReport, Node
from . import Importer
from .reading import JsonSyntaxError, numbered_lines, parse_json

EXAMPLES = 5  # warnings per kind of repair; the rest are counted in one summary warning
ALWAYS = sys.maxsize  # ImportReport.warn limit for summaries, which must never be dropped
NAME_WORDS = 12

_BLOCK = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>|<[A-Za-z/][^<>]*$")
_PRICE = re.compile(r"\$?\d[\d,]*(?:\.\d+)?(?:\s*-\s*\$?\d[\d,]*(?:\.\d+)?)?")
_MAX_CATEGORY_WORDS = 6


def strip_html(text: object) -> str:
    """Text without HTML tags, entities or runs of whitespace.

    >>> strip_html('Arts, Music &amp; Photography')
    'Arts, Music & Photography'
    >>> strip_html('<span class="a-size-medium a-color-secondary"')
    ''
    >>> strip_html('Fits <b>all</b> wallets.<br/>Lasts')
    'Fits all wallets. Lasts'
    """
    if not isinstance(text, str):
        return ""
    text = _TAG.sub(" ", _BLOCK.sub(" ", text))
    return " ".join(html.unescape(text).split())


def first_words(text: str, count: int = NAME_WORDS) -> str:
    words = text.split()
    return " ".join(words[:count]) + ("…" if len(words) > count else "")


def parse_object(line: str, where: str) -> dict:
    """One JSON object, or a Python dict literal as in some Amazon 2018 files."""
    try:
        obj = parse_json(line, where)
    except JsonSyntaxError as exc:
        try:
            obj = ast.literal_eval(line)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise InputError(
                f"neither a JSON object nor a Python dict literal (JSON error: {str(exc).split(': ', 1)[-1]})",
                where,
            ) from None
    if not isinstance(obj, dict):
        raise InputError(f"expected one object per line, got {type(obj).__name__}", where)
    return obj


def _texts(value: object) -> list[str]:
    """A field that may be a string or a list of strings, as clean non-empty texts."""
    items = value if isinstance(value, list) else [value]
    return [t for t in (strip_html(v) for v in items) if t]


@dataclass
class _Reviews:
    count: int = 0
    stars: float = 0.0
    best: list[tuple[int, int, str]] = field(default_factory=list)  # (votes, length, text)


class AmazonImporter(Importer):
    name = "amazon"
    domain = "amazon"
    summary = "Amazon 2018 products (meta_<Category>.json.gz + <Category>_5.json.gz reviews) as a STaRK-Amazon-like graph"

    def __init__(self, sources=(), limit=None, reviews: int = 5, review_chars: int = 1000, **options) -> None:
        super().__init__(sources, limit, **options)
        self.reviews_per_product = int(reviews)
        self.review_chars = int(review_chars)
        self.stats: Counter[str] = Counter()

    def dataset_info(self) -> dict[str, str]:
        return {
            **super().dataset_info(),
            "name": "Amazon Review Data 2018",
            "version": "2018 (Ni, Li & McAuley, EMNLP 2019)",
            "licence": "research use",
            "origin": "McAuley et al., Amazon Review Data 2018 (meta and 5-core review files); "
            f"categories: {', '.join(self.categories()) or '?'}",
        }

    def meta_files(self) -> list[Path]:
        files: list[Path] = []
        for source in self.require_sources(1, "a folder with meta_<Category>.json.gz files"):
            if source.is_dir():
                found = sorted(source.glob("meta_*.json.gz")) + sorted(source.glob("meta_*.json"))
                if not found:
                    raise KqeError(f"{source}: no meta_<Category>.json.gz file here")
                files += found
            else:
                files.append(source)
        return files

    def categories(self) -> list[str]:
        try:
            return [_category_of(path) for path in self.meta_files()]
        except KqeError:
            return []

    # ------------------------------------------------------------------ reading

    def records(self, report: ImportReport) -> Iterator[Node | Edge]:
        self.stats.clear()
        metas = self.meta_files()
        reviews = self._read_reviews(metas, report)
        emitted: set[str] = set()
        products: set[str] = set()
        edges: set[tuple[str, str, str]] = set()
        truncated = False

        def room() -> bool:
            return self.limit is None or len(emitted) < self.limit

        for path in metas:
            for number, line in numbered_lines(path, report):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                if not room():
                    truncated = True
                    break
                meta = parse_object(line, where)
                asin = str(meta.get("asin") or "").strip()
                if not asin:
                    raise InputError("product without an 'asin'", where)
                if asin in products:
                    self._repair(report, "duplicate_products", f"{where}: product {asin} listed again; skipped")
                    continue
                products.add(asin)
                product, brand, categories = self._product(asin, meta, reviews.get(asin), where, report)
                emitted.add(asin)
                yield product

                out: list[Edge] = []
                if brand:
                    brand_id = f"brand:{brand}"
                    if brand_id not in emitted and room():
                        emitted.add(brand_id)
                        yield Node(id=brand_id, type="Brand", name=brand, where=where)
                    out.append(Edge(asin, "hasBrand", brand_id, where=where))
                broader = None
                for category in categories:
                    category_id = f"category:{category}"
                    if category_id not in emitted and room():
                        emitted.add(category_id)
                        yield Node(id=category_id, type="Category", name=category, where=where)
                    out.append(Edge(asin, "hasCategory", category_id, where=where))
                    if broader is not None:
                        out.append(Edge(category_id, "subcategoryOf", broader, where=where))
                    broader = category_id
                for key, relation in (("also_buy", "alsoBought"), ("also_view", "alsoViewed")):
                    listed = meta.get(key) or []
                    for other in dict.fromkeys(str(a).strip() for a in (listed if isinstance(listed, list) else [listed])):
                        if other and other != asin:
                            out.append(Edge(asin, relation, other, where=where))
                for edge in out:
                    triple = (edge.head, edge.relation, edge.tail)
                    if triple not in edges:
                        edges.add(triple)
                        yield edge
            if truncated:
                break

        if not truncated:
            orphans = len(set(reviews) - products)
            self.stats["reviews_of_unknown_products"] = orphans
            if orphans:
                report.warn(f"reviews of {orphans} ASINs that no meta file lists were not imported", limit=ALWAYS)
        self._summarise(report)

    def _product(self, asin: str, meta: dict, reviews: _Reviews | None, where: str, report: ImportReport):
        description = " ".join(_texts(meta.get("description")))
        features = _texts(meta.get("feature"))
        brand = strip_html(meta.get("brand"))
        brand = re.sub(r"^by\s+", "", brand).strip()

        categories: list[str] = []
        for entry in _texts(meta.get("category")):
            if len(entry.split()) > _MAX_CATEGORY_WORDS or entry.endswith((".", "!")):
                self._repair(report, "categories_moved_to_features",
                             f"{where}: category entry {first_words(entry, 8)!r} reads like a feature; moved to features")
                features.append(entry)
            elif entry not in categories:
                categories.append(entry)

        title = strip_html(meta.get("title"))
        if not title:
            snippet = first_words(description) if description else ""
            title = ": ".join(t for t in (brand, snippet) if t) or f"product {asin}"
            self._repair(report, "untitled_products", f"{where}: product {asin} has no title (only markup); named {title!r}")

        fields: list[tuple[str, str]] = []
        if description:
            fields.append(("description", description))
        if features:
            fields.append(("features", "; ".join(dict.fromkeys(features))))
        price = strip_html(meta.get("price"))
        if price:
            if _PRICE.fullmatch(price):
                fields.append(("price", price))
            else:
                self._repair(report, "bad_prices", f"{where}: price {price[:40]!r} is not an amount; dropped")
        if reviews is not None and reviews.count:
            mean = reviews.stars / reviews.count
            plural = "s" * (reviews.count > 1)
            fields.append(("averageRating", f"{mean:.1f} out of 5 stars ({reviews.count} review{plural})"))
            for _votes, _length, text in sorted(reviews.best, reverse=True):
                fields.append(("review", text))
        return Node(id=asin, type="Product", name=title, fields=tuple(fields), where=where), brand, categories

    def _read_reviews(self, metas: list[Path], report: ImportReport) -> dict[str, _Reviews]:
        reviews: dict[str, _Reviews] = {}
        for meta in metas:
            category = _category_of(meta)
            path = next((p for p in (meta.with_name(f"{category}_5.json.gz"), meta.with_name(f"{category}_5.json"))
                         if p.is_file()), None)
            if path is None:
                report.warn(f"{meta}: no {category}_5.json.gz beside it; its products have no reviews", limit=ALWAYS)
                continue
            for number, line in numbered_lines(path, report):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                review = parse_object(line, where)
                asin = str(review.get("asin") or "").strip()
                if not asin:
                    raise InputError("review without an 'asin'", where)
                try:
                    stars = float(review.get("overall"))
                except (TypeError, ValueError):
                    raise InputError(f"review rating 'overall' is not a number: {review.get('overall')!r}", where) from None
                entry = reviews.setdefault(asin, _Reviews())
                entry.count += 1
                entry.stars += stars
                summary = strip_html(review.get("summary"))
                body = strip_html(review.get("reviewText"))
                if not (summary or body):
                    continue
                if len(body) > self.review_chars:
                    body = body[: self.review_chars].rsplit(" ", 1)[0] + "…"
                text = f"{stars:g} out of 5 stars. " + (f"{summary}: {body}" if summary and body else summary or body)
                try:
                    votes = int(str(review.get("vote") or "0").replace(",", ""))
                except ValueError:
                    votes = 0
                entry.best.append((votes, len(body), text))
                if len(entry.best) > self.reviews_per_product:
                    entry.best.sort(reverse=True)
                    del entry.best[self.reviews_per_product:]
        return reviews

    # ---------------------------------------------------------------- reporting

    def _repair(self, report: ImportReport, kind: str, message: str) -> None:
        self.stats[kind] += 1
        if self.stats[kind] <= EXAMPLES:
            report.warn(message)
        if kind == "duplicate_products":
            report.duplicate_nodes += 1

    def _summarise(self, report: ImportReport) -> None:
        explain = {
            "duplicate_products": "products listed again under the same ASIN were skipped",
            "untitled_products": "products without a title were named by brand and description",
            "categories_moved_to_features": "sentence-like category entries were moved to the features",
            "bad_prices": "prices that were not amounts were dropped",
        }
        for kind, text in explain.items():
            if self.stats[kind]:
                report.warn(f"{self.stats[kind]} {text} (first {EXAMPLES} listed)", limit=ALWAYS)


def _category_of(meta: Path) -> str:
    """'meta_Gift_Cards.json.gz' → 'Gift_Cards'."""
    name = meta.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name.removeprefix("meta_")
