// Runs every system through the same scenarios on one PostgreSQL, one after the other, and
// prints the table for BENCHMARKS.md. Started by run.sh (which installs everything first).
//
// Env: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), SIZES (default
// 10000,100000), WORKERS (default 1,16), SYSTEMS (default steadfast,steadfast-tuned,
// graphile-worker,graphile-worker-preset,pg-boss),
// STEADFAST_BIN (the steadfast runner, built by run.sh), STEADFAST_BEFORE_BIN (the same runner
// built from another revision: add `steadfast-before` to SYSTEMS), RUST_PEERS_BIN (the
// graphile_worker crate and apalis runner of benches/jobs-rust-peers, built by run.sh).
import { spawnSync } from "node:child_process";
import pg from "pg";

const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const sizes = (process.env.SIZES ?? "10000,100000").split(",").map(Number);
// SQLite (SYSTEMS=steadfast only): DATABASE_URL=sqlite:///tmp/bench.db.
const workers = (process.env.WORKERS ?? "1,16").split(",").map(Number);
const systems = (
  process.env.SYSTEMS ?? "steadfast,steadfast-tuned,graphile-worker,graphile-worker-preset,pg-boss"
).split(",");
// retry: as steady, with every 20th job failing its first attempt and retried 1 s later
// (graphile-worker: its fixed exp(1) s); the table adds how late each retry started.
const scenarios = (process.env.SCENARIOS ?? "burn,steady,idle,retry").split(",");
// ENQUEUE=bulk skips the single-enqueue shapes (10,000 one-by-one inserts take minutes).
const enqueues = (process.env.ENQUEUE ?? "single,bulk").split(",");
const node = process.execPath;
const here = new URL(".", import.meta.url).pathname;

const command = {
  // Its defaults (`WorkerConfig::new().concurrency(workers)`, `StoreOptions::new(url)`).
  steadfast: [process.env.STEADFAST_BIN],
  // The defaults with `prefetch 0` (the default before issue 35).
  "steadfast-prefetch0": [process.env.STEADFAST_BIN, "--config=prefetch0"],
  // The defaults with `keep_done(false)`: successful jobs deleted (graphile-worker's way).
  "steadfast-discard": [process.env.STEADFAST_BIN, "--config=discard"],
  // Tuned: see peer_bench.rs (`--config=tuned`).
  "steadfast-tuned": [process.env.STEADFAST_BIN, "--config=tuned"],
  // A build of another revision (say main), for a before/after in the same run.
  "steadfast-before": [process.env.STEADFAST_BEFORE_BIN],
  "graphile-worker": [node, here + "graphile.mjs"],
  "graphile-worker-preset": [node, here + "graphile.mjs", "--config=preset"],
  "pg-boss": [node, here + "pgboss.mjs"],
  // The Rust peers (benches/jobs-rust-peers): the graphile_worker crate, defaults and the
  // preset; apalis with apalis-postgres.
  "graphile-rs": [process.env.RUST_PEERS_BIN, "--system=graphile-rs"],
  "graphile-rs-preset": [process.env.RUST_PEERS_BIN, "--system=graphile-rs-preset"],
  apalis: [process.env.RUST_PEERS_BIN, "--system=apalis"],
};
// apalis stores a failed task's retry without a delay of its own: no retry row for it.
const skip = (system, scenario) => system === "apalis" && scenario === "retry";

async function resetSchemas() {
  if (url.startsWith("sqlite:")) {
    // steadfast alone (the peers are PostgreSQL-only): a fresh file per run.
    const fs = await import("node:fs");
    const path = url.replace(/^sqlite:\/\//, "").split("?")[0];
    for (const f of [path, `${path}-wal`, `${path}-shm`]) fs.rmSync(f, { force: true });
    return;
  }
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  for (const s of ["bench_steadfast", "bench_graphile", "bench_pgboss", "bench_graphile_rs", "apalis"]) {
    await c.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  }
  // apalis-postgres records its migrations in public._sqlx_migrations (run.sh gives the
  // harness a database of its own, steadfast_bench, so nothing else's table is dropped).
  if (new URL(url).pathname === "/steadfast_bench") {
    await c.query("DROP TABLE IF EXISTS public._sqlx_migrations");
  }
  await c.end();
}

const runs = [];
for (const scenario of scenarios) {
  const shapes =
    scenario === "idle"
      ? workers.map((w) => ({ jobs: 200, workers: w, enqueue: "single" }))
      : sizes.flatMap((jobs) =>
          workers.flatMap((w) => enqueues.map((e) => ({ jobs, workers: w, enqueue: e }))),
        );
  for (const shape of shapes) runs.push({ scenario, ...shape });
}

const results = [];
for (const r of runs) {
  for (const system of systems) {
    if (skip(system, r.scenario)) continue;
    await resetSchemas();
    const [cmd, ...rest] = command[system];
    const argv = [...rest, `--scenario=${r.scenario}`, `--jobs=${r.jobs}`, `--workers=${r.workers}`, `--enqueue=${r.enqueue}`];
    const p = spawnSync(cmd, argv, {
      env: { ...process.env, DATABASE_URL: url },
      encoding: "utf8",
      timeout: 20 * 60 * 1000,
    });
    const line = (p.stdout ?? "").trim().split("\n").filter((l) => l.startsWith("{")).pop();
    if (p.status !== 0 || !line) {
      console.error(`${system} ${JSON.stringify(r)} failed (${p.status}):\n${p.stderr}`);
      continue;
    }
    const res = { ...JSON.parse(line), system };
    await new Promise((r) => setTimeout(r, 1000)); // let the previous run's connections go
    results.push(res);
    console.error(JSON.stringify(res));
  }
}
await resetSchemas();

const fmt = (n) => (n == null ? "—" : Math.round(n).toLocaleString("en-US"));
const ms = (n) => (n == null ? "—" : n < 10 ? n.toFixed(2) : n.toFixed(1));
console.log("| scenario | jobs | workers | enqueue | system | enqueue/s | processed/s | start p50 ms | start p99 ms | retry late p50 / p99 ms |");
console.log("|---|---:|---:|---|---|---:|---:|---:|---:|---:|");
for (const x of results) {
  const lat = x.scenario !== "burn";
  console.log(
    `| ${x.scenario} | ${fmt(x.jobs)} | ${x.workers} | ${x.enqueue} | ${x.system} | ${fmt(x.enqueue_per_s)} | ${fmt(x.processed_per_s)} | ${lat ? ms(x.p50_ms) : "—"} | ${lat ? ms(x.p99_ms) : "—"} | ${x.retry_late_p50_ms == null ? "—" : `${ms(x.retry_late_p50_ms)} / ${ms(x.retry_late_p99_ms)}`} |`,
  );
}
