// graphile-worker: `run` with `concurrency` = workers (its defaults otherwise: LISTEN/NOTIFY,
// prepared statements, no local queue or batched completion).
import { run, makeWorkerUtils, Logger } from "graphile-worker";
import { args, enqueueAll, tracker, report, nowMs } from "./common.mjs";

const cfg = args();
const schema = "bench_graphile";
const t = tracker(cfg.jobs);
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
    taskList: { noop: async (payload) => t.start(payload) },
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
report("graphile-worker", cfg, enqueueMs, ended - began, t);
await runner.stop();
await utils.release();
