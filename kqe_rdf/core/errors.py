"""Errors a user can act on: each says what was wrong and what to do next."""

from __future__ import annotations


class KqeError(Exception):
    """Base of every error kqe-rdf reports to users (the CLI prints its message, no traceback)."""


class InputError(KqeError):
    """Bad input data: malformed file, unknown id, empty text, wrong encoding."""

    def __init__(self, message: str, where: str = "") -> None:
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class SchemaError(KqeError):
    """A name that the ontology does not define (type, relation, field)."""


class KBNotFound(KqeError):
    """No knowledge base at the given path."""


class SparqlError(KqeError):
    """A SPARQL query that failed to parse or run, with a readable explanation."""
