// Shared by the peer runners: the clock, the enqueue patterns and the result line.
// Every runner prints one JSON line; run.mjs builds the table from those lines.

export const nowMs = () => performance.timeOrigin + performance.now();

export function args() {
  const a = Object.fromEntries(
    process.argv.slice(2).map((s) => s.replace(/^--/, "").split("=")),
  );
  return {
    scenario: a.scenario, // burn | steady | idle
    jobs: Number(a.jobs),
    workers: Number(a.workers),
    enqueue: a.enqueue, // single | bulk
    url: process.env.DATABASE_URL,
  };
}

/** One job per call from 16 concurrent callers (a web server's shape), or batches. */
export async function enqueueAll(cfg, one, many) {
  const started = nowMs();
  if (cfg.scenario === "idle") {
    // Workers idle between jobs: one job every 20 ms.
    for (let i = 0; i < cfg.jobs; i++) {
      await one({ t: nowMs() });
      await new Promise((r) => setTimeout(r, 20));
    }
  } else if (cfg.enqueue === "bulk") {
    const batch = cfg.scenario === "steady" ? 100 : 1000;
    for (let i = 0; i < cfg.jobs; i += batch) {
      const n = Math.min(batch, cfg.jobs - i);
      const t = nowMs();
      await many(Array.from({ length: n }, () => ({ t })));
    }
  } else {
    let next = 0;
    const caller = async () => {
      while (next < cfg.jobs) {
        next++;
        await one({ t: nowMs() });
      }
    };
    await Promise.all(Array.from({ length: 16 }, caller));
  }
  return nowMs() - started;
}

/** Counts starts and their latency; resolves when `total` jobs have run. */
export function tracker(total) {
  const lat = new Float64Array(total);
  let n = 0;
  let resolve;
  const done = new Promise((r) => (resolve = r));
  return {
    done,
    start(payload) {
      if (n < total) lat[n] = nowMs() - payload.t;
      n++;
      if (n === total) resolve(nowMs());
    },
    quantiles() {
      const s = Array.from(lat.subarray(0, Math.min(n, total))).sort((a, b) => a - b);
      const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
      return { p50_ms: q(0.5), p99_ms: q(0.99) };
    },
  };
}

export function report(system, cfg, enqueueMs, processMs, t) {
  const out = {
    system,
    scenario: cfg.scenario,
    jobs: cfg.jobs,
    workers: cfg.workers,
    enqueue: cfg.enqueue,
    enqueue_per_s: Math.round((cfg.jobs * 1000) / enqueueMs),
    processed_per_s: Math.round((cfg.jobs * 1000) / processMs),
    ...t.quantiles(),
  };
  console.log(JSON.stringify(out));
}
