-- The W3C trace context (`traceparent`, `tracestate`) of whoever queued the job, so each
-- attempt's span can be linked to (or parented on) that trace, however much later and in
-- whichever process it runs. NULL for jobs queued without one and for schedule fire times.
ALTER TABLE steadfast_jobs ADD COLUMN traceparent TEXT;
ALTER TABLE steadfast_jobs ADD COLUMN tracestate TEXT;
