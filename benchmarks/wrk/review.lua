-- Posts AdmissionReview bodies round-robin, as the kube-apiserver does: POST,
-- Content-Type application/json, HTTP/1.1 keep-alive (webhook-anchors 1.1).
--
--   wrk -t2 -c32 -d15s -s benchmarks/wrk/review.lua https://127.0.0.1:PORT \
--       -- /mutate?timeout=10s review-00.json review-01.json ...
--
-- Every request carries its own request uid, as every review from the apiserver does: the
-- bodies' first "uid" value is replaced by a fresh one of the same form. Otherwise the
-- bodies are sent as they are: the pods of a ReplicaSet at mutating admission, identical
-- but for the uid. With NUMAGATE_WRK_UNIQUE=1 every request is also a different pod: the
-- value of the bodies' "tier" label becomes a per-request one, so no two objects are the
-- same (numagate's decision cache cannot help; benchmarks/server.py's "-unique" runs).
-- A body holding the mark @@N@@ (the apiserver's recorded bodies, benchmarks/gen.py
-- apiserver_template) gets a per-request token at every mark instead: its uid, its name
-- and its service-account volume's random suffix, as each create differs.
--
-- done() prints one line "WRK_RESULT {...}" (JSON, microseconds) for benchmarks/server.py.

local UID_LABEL = '"uid":"'
local TIER_LABEL = '"tier":"'
local MARK = "@@N@@"
local unique = os.getenv("NUMAGATE_WRK_UNIQUE") == "1"
local bodies = {}  -- per body: the pieces around the uid (and the tier label value)
local next_index = 0
local path = nil
local headers = { ["Content-Type"] = "application/json" }
local counter = 0
local thread_tag = 0
local threads_started = 0

-- Runs in the main state once per thread: number the threads so that uids never repeat.
function setup(thread)
  threads_started = threads_started + 1
  thread:set("tag", threads_started)
end

local function cut_after(text, label, from)
  local s, e = string.find(text, label, from, true)
  if s == nil then
    error("no " .. label .. " in a body")
  end
  local close = string.find(text, '"', e + 1, true)
  return e, close
end

function init(args)
  path = args[1]
  if path == nil or #args < 2 then
    error("usage: -- PATH BODY.json [BODY.json ...]")
  end
  thread_tag = tonumber(tag) or 0
  for i = 2, #args do
    local f = assert(io.open(args[i], "rb"))
    local body = f:read("*a")
    f:close()
    local piece = { marked = string.find(body, MARK, 1, true) ~= nil }
    if piece.marked then
      local from = 1
      while true do
        local s, me = string.find(body, MARK, from, true)
        if s == nil then break end
        piece[#piece + 1] = body:sub(from, s - 1)
        from = me + 1
      end
      piece[#piece + 1] = body:sub(from)
    else
      local e, close = cut_after(body, UID_LABEL, 1)
      piece[1] = body:sub(1, e)
      if unique then
        local te, tclose = cut_after(body, TIER_LABEL, close)
        piece[2] = body:sub(close, te)
        piece[3] = body:sub(tclose)
      else
        piece[2] = body:sub(close)
      end
    end
    bodies[#bodies + 1] = piece
  end
  -- Each thread starts at a different body so the mix is the same from the first second.
  next_index = math.random(0, #bodies - 1)
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
  next_index = next_index % #bodies + 1
  counter = counter + 1
  local uid = string.format("%08x-0000-4000-8000-%012x", thread_tag, counter)
  local p = bodies[next_index]
  local body
  if p.marked then
    body = table.concat(p, string.format("%d-%x", thread_tag, counter))
  elseif unique then
    body = p[1] .. uid .. p[2] .. string.format("t%d-%d", thread_tag, counter) .. p[3]
  else
    body = p[1] .. uid .. p[2]
  end
  return wrk.format("POST", path, headers, body)
end

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
done = dofile(here .. "result.lua")
