// pg-boss: `work` with `localConcurrency` = workers, batches of 50 with `burstWhenBatchFull` (a
// worker otherwise waits its polling interval, 0.5 s at least, after every fetch), its
// LISTEN/NOTIFY on (`useListenNotify`, queue `notify`), polling every 0.5 s as the fallback.
import { PgBoss } from "pg-boss";
import { args, enqueueAll, tracker, report, nowMs, RETRY_DELAY_MS } from "./common.mjs";

const cfg = args();
const t = tracker(cfg);
const boss = new PgBoss({
  connectionString: cfg.url,
  schema: "bench_pgboss",
  useListenNotify: true,
  supervise: false,
  schedule: false,
  max: 20,
});
boss.on("error", (e) => console.error("pg-boss:", e.message));
await boss.start();
await boss.createQueue("noop", { notify: true });
const start = () =>
  boss.work(
    "noop",
    {
      localConcurrency: cfg.workers,
      batchSize: 50,
      burstWhenBatchFull: true,
      pollingIntervalSeconds: 0.5,
      notifyPollingIntervalSeconds: 0.5,
    },
    async (jobs) => {
      // A batch handler fails or completes its whole batch: the failing jobs are failed one
      // by one (boss.fail), the rest complete with the batch.
      const failing = jobs.filter((j) => t.start(j.data, (j.retryCount ?? 0) + 1, j.id));
      if (failing.length) await boss.fail("noop", failing.map((j) => j.id));
    },
  );
const retry = { retryLimit: 2, retryDelay: RETRY_DELAY_MS / 1000, retryBackoff: false };
const one = (p) => boss.send("noop", p, retry);
const many = (ps) => boss.insert("noop", ps.map((data) => ({ data, ...retry })));

let enqueueMs, began;
if (cfg.scenario === "burn") {
  enqueueMs = await enqueueAll(cfg, one, many);
  began = nowMs();
  await start();
} else {
  await start();
  await new Promise((r) => setTimeout(r, 500));
  began = nowMs();
  enqueueMs = await enqueueAll(cfg, one, many);
}
const ended = await t.done;
report("pg-boss", cfg, enqueueMs, ended - began, t);
await boss.stop({ graceful: false, wait: false, close: true });
process.exit(0);
