-- Priorities (with aging), per-key limits and pause/resume. Existing rows get priority 0, no key.

-- A job's priority buys it a head start in the claim order: it sorts as if it had been due
-- `head_start_ms` earlier (priority x the aging step), so a job of lower priority that has
-- waited longer than that difference goes first: nothing is starved.
ALTER TABLE steadfast_jobs ADD COLUMN priority BIGINT NOT NULL DEFAULT 0;
ALTER TABLE steadfast_jobs ADD COLUMN head_start_ms BIGINT NOT NULL DEFAULT 0;
-- The key whose limits (steadfast_keys) the job runs under.
ALTER TABLE steadfast_jobs ADD COLUMN limit_key TEXT;

DROP INDEX steadfast_jobs_due;
CREATE INDEX steadfast_jobs_due ON steadfast_jobs ((run_at - head_start_ms), id) WHERE state = 'available';
-- A limited key's next jobs, in claim order (the limited claim reads a few per key).
CREATE INDEX steadfast_jobs_key_due ON steadfast_jobs (limit_key, (run_at - head_start_ms), id)
    WHERE state = 'available' AND limit_key IS NOT NULL;
-- How many of a key's jobs are running, counted by the claim under the key's row lock.
CREATE INDEX steadfast_jobs_running_key ON steadfast_jobs (limit_key)
    WHERE state = 'running' AND limit_key IS NOT NULL;

-- Per key: at most `max_running` at once, at most `rate` starts per `window_ms` (GCRA: `tat`
-- is the theoretical arrival time of the next start), or paused.
CREATE TABLE steadfast_keys (
    key         TEXT PRIMARY KEY,
    max_running BIGINT,
    rate        BIGINT,
    window_ms   BIGINT,
    tat         BIGINT NOT NULL DEFAULT 0,
    paused      BIGINT NOT NULL DEFAULT 0,
    updated_at  BIGINT NOT NULL
);

-- A paused queue (all jobs of a handler).
CREATE TABLE steadfast_queues (
    handler    TEXT PRIMARY KEY,
    paused     BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL
);
