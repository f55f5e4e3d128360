"""`python -m kqe_rdf ...` is the `kqe-rdf` command, for when the console script is not on PATH."""

from .cli import main

main()
