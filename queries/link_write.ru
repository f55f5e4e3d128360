# Replace the links graph of one external endpoint (VALUES ?graph) by the given quads (VALUES (?g ?s ?p ?o)):
# the accepted links and their PROV-O provenance. One update, so one transaction: readers see the old
# graph or the new one, never half of it.
DELETE { GRAPH ?graph { ?s ?p ?o } } WHERE {
  #VALUES ?graph
  GRAPH ?graph { ?s ?p ?o }
} ;
INSERT { GRAPH ?g { ?s ?p ?o } } WHERE {
  #VALUES (?g ?s ?p ?o)
}
