-- Baseline for RL.SLIDING APPROX, in the style of the "Rate Limiting in Rust Using
-- Redis" tutorial's two-window counter: one counter
-- string per aligned window (`<key>:<window start>`), expiring after two
-- windows; the count weighs the previous window's counter by the part of
-- it still inside the sliding window. Both counters are read with one MGET,
-- the current one grown with INCRBY. The two keys are derived inside the
-- script, as the tutorial derives them in the client: fine on one node, not
-- cluster-safe (that is one of the things the module fixes).
--
-- KEYS[1]  the limiter's base key
-- ARGV[1]  window in ms
-- ARGV[2]  limit per window
-- ARGV[3]  cost, default 1
-- ARGV[4]  optional time in ms instead of TIME (memory figures only)
-- Reply: {allowed, count}
local base = KEYS[1]
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local cost = tonumber(ARGV[3]) or 1
local now = tonumber(ARGV[4])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local start = now - now % window
local current_key = base .. ':' .. string.format('%d', start)
local previous_key = base .. ':' .. string.format('%d', start - window)
local counts = redis.call('MGET', previous_key, current_key)
local previous = tonumber(counts[1]) or 0
local current = tonumber(counts[2]) or 0
local count = current + math.floor(previous * (window - (now - start)) / window)
if count + cost > limit then
  return {0, count}
end
redis.call('INCRBY', current_key, cost)
redis.call('PEXPIRE', current_key, 2 * window)
return {1, count + cost}
