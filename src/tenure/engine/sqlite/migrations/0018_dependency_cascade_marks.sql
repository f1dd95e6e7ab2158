-- Dependencies: PostgreSQL's 0018 makes its settlement function do what SQLite's 0016 already
-- does (the failed job's trigger handles the whole cascade, stamping cascade_mark); nothing to
-- change here. The number is kept in step on both engines.
CREATE INDEX IF NOT EXISTS tenure_dependencies_parent ON tenure_dependencies (parent_id, released);
