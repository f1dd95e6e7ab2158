-- Worker instances (connection loss is not a lost lease; the reaper and
-- shared owners). `lease_instance` is stamped by the claim with the claiming worker's unique
-- per-process instance id (Worker.instance); `lease_owner` stays diagnostics only (docs/spec.md
-- 3.7). The worker registry records which instance last heartbeated each row, so the maintenance
-- reaper ends the leases of THAT instance only, never every lease that carries a silent row's
-- owner string. A claim without an instance (a direct jobs.claim) stamps NULL: no reaper and no
-- lost-claim release ever touches it; it ends by expiry, as before.
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS lease_instance TEXT;
ALTER TABLE tenure_workers ADD COLUMN IF NOT EXISTS instance TEXT;
