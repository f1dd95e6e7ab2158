-- A paused schedule (store.schedules.pause, docs/maintenance.md "Pausing a schedule") keeps its
-- row and its plan but fires nothing: paused_at is the epoch ms it was paused, NULL when active.
ALTER TABLE tenure_schedules ADD COLUMN IF NOT EXISTS paused_at BIGINT;
