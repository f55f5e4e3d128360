# Appended to a served SPARQL Update as its last operations (the same transaction): the mark graph emptied of
# whatever the update put there or left, then the update marked with its id (VALUES ?update), so that after a
# worker was stopped mid-update a fresh one can tell whether it committed (kqe_rdf/service/jobs.py). The graph
# is the server's: emptied again once the answer is known, so no client ever sees a mark or one of its own there.
DROP SILENT GRAPH <urn:kqe:update-commits> ;
INSERT { GRAPH <urn:kqe:update-commits> { ?update <https://w3id.org/kqe/core#committed> true } } WHERE {
  #VALUES ?update
}
