-- Propagation headers carried from the enqueue to the run (the OpenTelemetry trace context).
ALTER TABLE tenure_jobs ADD COLUMN IF NOT EXISTS headers TEXT;
