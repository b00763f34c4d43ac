// Shared by the peer runners: the clock, the enqueue patterns and the result line.
// Every runner prints one JSON line; run.mjs builds the table from those lines.

export const nowMs = () => performance.timeOrigin + performance.now();

export function args() {
  const a = Object.fromEntries(
    process.argv.slice(2).map((s) => s.replace(/^--/, "").split("=")),
  );
  return {
    scenario: a.scenario, // burn | steady | idle | retry
    jobs: Number(a.jobs),
    workers: Number(a.workers),
    enqueue: a.enqueue, // single | bulk
    url: process.env.DATABASE_URL,
  };
}

/** The retry scenario: every 20th job fails its first attempt, to be retried after 1 s. */
export const RETRY_DELAY_MS = 1000;
export const fails = (cfg) => (cfg.scenario === "retry" ? Math.ceil(cfg.jobs / 20) : 0);
const stamp = (cfg, i, t) => (cfg.scenario === "retry" && i % 20 === 0 ? { t, fail: true } : { t });

/** One job per call from 16 concurrent callers (a web server's shape), or batches. */
export async function enqueueAll(cfg, one, many) {
  const started = nowMs();
  if (cfg.scenario === "idle") {
    // Workers idle between jobs: one job every 20 ms.
    for (let i = 0; i < cfg.jobs; i++) {
      await one(stamp(cfg, i, nowMs()));
      await new Promise((r) => setTimeout(r, 20));
    }
  } else if (cfg.enqueue === "bulk") {
    const batch = cfg.scenario === "burn" ? 1000 : 100;
    for (let i = 0; i < cfg.jobs; i += batch) {
      const n = Math.min(batch, cfg.jobs - i);
      const t = nowMs();
      await many(Array.from({ length: n }, (_, k) => stamp(cfg, i + k, t)));
    }
  } else {
    let next = 0;
    const caller = async () => {
      while (next < cfg.jobs) {
        const i = next++;
        await one(stamp(cfg, i, nowMs()));
      }
    };
    await Promise.all(Array.from({ length: 16 }, caller));
  }
  return nowMs() - started;
}

const quantile = (xs) => {
  const s = Array.from(xs).sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return [q(0.5), q(0.99)];
};

/**
 * Counts starts (first attempts' latency; in the retry scenario, how late each retry started
 * after its failure plus the system's retry delay); resolves when every attempt has started.
 */
export function tracker(cfg, retryDelayMs = RETRY_DELAY_MS) {
  const total = cfg.jobs + fails(cfg);
  const lat = [];
  const late = [];
  const failedAt = new Map();
  let n = 0;
  let resolve;
  const done = new Promise((r) => (resolve = r));
  return {
    done,
    /** Records a start; true when this attempt is to fail (the handler then throws). */
    start(payload, attempt, id) {
      const now = nowMs();
      n++;
      if (attempt > 1) late.push(now - failedAt.get(String(id)) - retryDelayMs);
      else lat.push(now - payload.t);
      if (n === total) resolve(now);
      if (payload.fail && attempt === 1) {
        failedAt.set(String(id), now);
        return true;
      }
      return false;
    },
    quantiles() {
      const [p50_ms, p99_ms] = quantile(lat);
      if (!late.length) return { p50_ms, p99_ms };
      const [retry_late_p50_ms, retry_late_p99_ms] = quantile(late);
      return { p50_ms, p99_ms, retry_late_p50_ms, retry_late_p99_ms };
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
    processed_per_s: Math.round(((cfg.jobs + fails(cfg)) * 1000) / processMs),
    ...t.quantiles(),
  };
  console.log(JSON.stringify(out));
}
