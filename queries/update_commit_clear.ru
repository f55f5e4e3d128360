# The mark of the update with this id (VALUES ?update) removed, once its answer is known.
DELETE { GRAPH <urn:kqe:update-commits> { ?update <https://w3id.org/kqe/core#committed> true } } WHERE {
  #VALUES ?update
}
