-- Times are milliseconds since the Unix epoch (UTC) in both backends, so one set of queries serves both.
CREATE TABLE steadfast_schedules (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    key           TEXT UNIQUE,
    handler       TEXT NOT NULL,
    payload       TEXT NOT NULL,
    policy        TEXT NOT NULL,
    cron          TEXT,
    tz            TEXT,
    interval_ms   BIGINT,
    catch_up      TEXT NOT NULL,
    max_catch_up  BIGINT NOT NULL,
    allow_overlap BIGINT NOT NULL,
    active        BIGINT NOT NULL,
    created_at    BIGINT NOT NULL
);

CREATE TABLE steadfast_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    handler          TEXT NOT NULL,
    payload          TEXT NOT NULL,
    policy           TEXT NOT NULL,
    state            TEXT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    run_at           BIGINT NOT NULL,
    first_attempt_at BIGINT,
    last_delay_ms    BIGINT NOT NULL DEFAULT 0,
    lease_until      BIGINT,
    locked_by        TEXT,
    last_error       TEXT,
    last_error_code  TEXT,
    unique_key       TEXT,
    ordering_key     TEXT,
    schedule_id      BIGINT,
    fire_at          BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    finished_at      BIGINT
);

-- What a worker claims: due available jobs, and running jobs whose lease ran out.
CREATE INDEX steadfast_jobs_due ON steadfast_jobs (run_at, id) WHERE state = 'available';
CREATE INDEX steadfast_jobs_lease ON steadfast_jobs (lease_until) WHERE state = 'running';
CREATE UNIQUE INDEX steadfast_jobs_unique ON steadfast_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('available', 'running');
CREATE INDEX steadfast_jobs_ordering ON steadfast_jobs (ordering_key, id)
    WHERE ordering_key IS NOT NULL AND state IN ('available', 'running');
-- A fire time of a schedule runs once, however many workers compute it.
CREATE UNIQUE INDEX steadfast_jobs_fire ON steadfast_jobs (schedule_id, fire_at) WHERE schedule_id IS NOT NULL;
CREATE INDEX steadfast_jobs_finished ON steadfast_jobs (state, finished_at);
