-- make bench-http's load, for wrk (bench/README.md, "make bench-http").
-- BENCH_PATH=/open: the same GET every time (one subject, the client's
-- address, never refused). BENCH_PATH=/half: a fresh X-Client subject and
-- the spent one in turn, against a limit of 1 per 10 s, so every other
-- request is refused. BENCH_NONCE keeps one run's subjects apart from
-- every other run's. Prints one JSON line of figures when done.
local path = os.getenv("BENCH_PATH") or "/open"
local nonce = os.getenv("BENCH_NONCE") or tostring(os.time())
local plain, spent
local tid = 0
local n = 0

function setup(thread)
  tid = tid + 1
  thread:set("tid", tid)
end

-- wrk.format needs the Host header, which wrk sets just before init.
function init(args)
  plain = wrk.format("GET", path)
  spent = wrk.format("GET", path, {["X-Client"] = "spent-" .. nonce})
end

function request()
  if path ~= "/half" then
    return plain
  end
  n = n + 1
  if n % 2 == 0 then
    return spent
  end
  return wrk.format("GET", path, {["X-Client"] = "c-" .. nonce .. "-" .. tostring(tid) .. "-" .. n})
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "status_errors": %d, "connect_errors": %d, "read_errors": %d, ' ..
    '"write_errors": %d, "timeouts": %d, "p50_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
