// graphile-worker: `run` with `concurrency` = workers. `--config=defaults` (the default): its
// defaults otherwise (LISTEN/NOTIFY, prepared statements, no local queue or batched completion).
// `--config=preset`: the configuration its performance page publishes its numbers with
// (https://worker.graphile.org/docs/performance): `localQueue: { size: 500 }`,
// `completeJobBatchDelay: 0`, `failJobBatchDelay: 0`, `maxPoolSize: 25` (or workers + 1).
import { run, makeWorkerUtils, Logger } from "graphile-worker";
import { args, enqueueAll, tracker, report, nowMs } from "./common.mjs";

// Its retry delay is not configurable: exp(attempts) seconds after the failure.
const RETRY_MS = Math.exp(1) * 1000;

const cfg = args();
const preset = process.argv.includes("--config=preset");
const schema = "bench_graphile";
const t = tracker(cfg, RETRY_MS);
const utils = await makeWorkerUtils({ connectionString: cfg.url, schema });
await utils.migrate();
const logFactory = () => () => {};
const start = () =>
  run({
    connectionString: cfg.url,
    schema,
    concurrency: cfg.workers,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: new Logger(logFactory),
    ...(preset
      ? {
          maxPoolSize: Math.max(25, cfg.workers + 1),
          preset: {
            worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
          },
        }
      : {}),
    taskList: {
      noop: async (payload, helpers) => {
        if (t.start(payload, helpers.job.attempts, helpers.job.id)) throw new Error("fails once");
      },
    },
  });
const one = (p) => utils.addJob("noop", p);
const many = (ps) => utils.addJobs(ps.map((payload) => ({ identifier: "noop", payload })));

let runner, enqueueMs, began;
if (cfg.scenario === "burn") {
  enqueueMs = await enqueueAll(cfg, one, many);
  began = nowMs();
  runner = await start();
} else {
  runner = await start();
  await new Promise((r) => setTimeout(r, 500));
  began = nowMs();
  enqueueMs = await enqueueAll(cfg, one, many);
}
const ended = await t.done;
report(preset ? "graphile-worker-preset" : "graphile-worker", cfg, enqueueMs, ended - began, t);
await runner.stop();
await utils.release();
