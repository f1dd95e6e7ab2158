-- No vacuum of tenure_jobs (autovacuum's or anyone's plain VACUUM) truncates the table's empty
-- tail pages: truncation takes an ACCESS EXCLUSIVE lock on the table (and on its TOAST table for
-- the payloads), which stops every claim, enqueue and settlement while it lasts and is replayed on
-- hot standbys; drains were seen stalled on "while truncating relation". A queue table shrinks and
-- grows all day, so the pages a truncation would give back are refilled within minutes: they stay
-- in the file, in the free space map, for the next inserts (docs/maintenance.md, "Truncation").
-- The maintenance backstop says TRUNCATE false in its own statement too. SQLite: nothing to do.
ALTER TABLE tenure_jobs SET (vacuum_truncate = false, toast.vacuum_truncate = false);
