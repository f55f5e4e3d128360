# Every update mark removed: the first writer of a server does this, no request can be waiting on one then.
DROP SILENT GRAPH <urn:kqe:update-commits>
