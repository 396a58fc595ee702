-- done() for every numagate wrk script: one "WRK_RESULT {...}" line with wrk's summary and
-- latency percentiles, parsed by benchmarks/server.py parse_wrk. Loaded with dofile from the
-- script's own folder (wrk passes scripts by path).
return function(summary, latency, requests)
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
