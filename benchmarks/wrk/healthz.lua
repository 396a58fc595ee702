-- GET /healthz at a steady pace, to see how long the event loop keeps a trivial request
-- waiting while the server does other work (benchmarks/churn.py runs it next to the
-- review load; the inventory's updates must not stall the loop).
--
--   wrk -t1 -c1 -d10s -s benchmarks/wrk/healthz.lua https://127.0.0.1:PORT
--
-- NUMAGATE_WRK_DELAY_MS (default 20) is the pause between requests. done() prints the same
-- "WRK_RESULT {...}" line as review.lua, for benchmarks/server.py's parse_wrk.

local pace_ms = tonumber(os.getenv("NUMAGATE_WRK_DELAY_MS") or "") or 20

function request()
  return wrk.format("GET", "/healthz")
end

function delay()
  return pace_ms
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"status_errors":%d,' ..
    '"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,' ..
    '"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean))
end
