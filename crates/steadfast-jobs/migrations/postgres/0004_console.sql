-- What the console (steadfast-console, via `steadfast_jobs::inspect`) reads, bounded:
-- one queue's jobs in one state, newest first, a page at a time (keyset on id), and the
-- counts per queue and state (an index-only scan rather than a read of every row).
CREATE INDEX steadfast_jobs_by_handler ON steadfast_jobs (handler, state, id);
-- All queues' jobs in one state, newest first (the dead letters page).
CREATE INDEX steadfast_jobs_by_state ON steadfast_jobs (state, id);
-- A schedule paused from the console: inactive (no fire time is planned, as when cancelled)
-- but resumable; cancelled schedules have active = 0 and paused = 0.
ALTER TABLE steadfast_schedules ADD COLUMN paused BIGINT NOT NULL DEFAULT 0;
