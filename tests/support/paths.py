"""Where the repository and the shared datasets are, whichever folder a test lives in."""

from pathlib import Path

#: The repository's root (README.md, kqe_rdf/, docs/, bench/).
ROOT = Path(__file__).resolve().parents[2]
#: ../shared/data beside the repository: the real dev datasets (its README says which).
SHARED_DATA = ROOT.parent / "shared" / "data"
