-- Posts AdmissionReview bodies round-robin, as the kube-apiserver does: POST,
-- Content-Type application/json, HTTP/1.1 keep-alive (webhook-anchors 1.1).
--
--   wrk -t2 -c32 -d15s -s benchmarks/wrk/review.lua https://127.0.0.1:PORT \
--       -- /mutate?timeout=10s review-00.json review-01.json ...
--
-- done() prints one line "WRK_RESULT {...}" (JSON, microseconds) for benchmarks/server.py.

local prepared = {}
local next_index = 0

function init(args)
  local path = args[1]
  if path == nil or #args < 2 then
    error("usage: -- PATH BODY.json [BODY.json ...]")
  end
  for i = 2, #args do
    local f = assert(io.open(args[i], "rb"))
    local body = f:read("*a")
    f:close()
    prepared[#prepared + 1] = wrk.format(
      "POST", path, { ["Content-Type"] = "application/json" }, body)
  end
  -- Each thread starts at a different body so the mix is the same from the first second.
  next_index = math.random(0, #prepared - 1)
end

-- Optional pacing for the soak test (benchmarks/soak.py): each connection waits this many
-- milliseconds between requests, so the rate is steady instead of as fast as possible.
local pace_ms = tonumber(os.getenv("NUMAGATE_WRK_DELAY_MS") or "")
if pace_ms ~= nil and pace_ms > 0 then
  function delay()
    return pace_ms
  end
end

function request()
  next_index = next_index % #prepared + 1
  return prepared[next_index]
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
