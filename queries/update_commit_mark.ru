# Appended to a served SPARQL Update as its last operation (the same transaction): marks the update with its
# id (VALUES ?update) in a graph of its own, so that after a worker was stopped mid-update a fresh one can tell
# whether it committed (kqe_rdf/service/jobs.py). Removed again once the answer is known.
INSERT { GRAPH <urn:kqe:update-commits> { ?update <https://w3id.org/kqe/core#committed> true } } WHERE {
  #VALUES ?update
}
