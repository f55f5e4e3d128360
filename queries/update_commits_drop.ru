# Every update mark removed: at a server's start, after an update answered, after a commit check. At most one
# update is in the store at a time (one writer), and no client job runs while its mark is there.
DROP SILENT GRAPH <urn:kqe:update-commits>
