-- GET /healthz at a steady pace, to see how long the event loop keeps a trivial request
-- waiting while the server does other work (benchmarks/churn.py runs it next to the
-- review load; the inventory's updates must not stall the loop).
--
--   wrk -t1 -c1 -d10s -s benchmarks/wrk/healthz.lua https://127.0.0.1:PORT
--
-- NUMAGATE_WRK_DELAY_MS (default 20) is the pause between requests. done() (result.lua) prints the same
-- "WRK_RESULT {...}" line as review.lua, for benchmarks/server.py's parse_wrk.

local pace_ms = tonumber(os.getenv("NUMAGATE_WRK_DELAY_MS") or "") or 20

function request()
  return wrk.format("GET", "/healthz")
end

function delay()
  return pace_ms
end

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
done = dofile(here .. "result.lua")
