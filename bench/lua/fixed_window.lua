-- Baseline for RL.FIXED, in the style of application-kit's Lua script: a
-- counter string read with GET, created with SET + EXPIRE on a window's
-- first call, else grown with INCRBY; an optional override hash is read in
-- the same step; the reply carries the TTL like application-kit's.
--
-- KEYS[1]  the counter
-- KEYS[2]  optional override hash (fields max_requests, expiry)
-- ARGV[1]  max requests per window
-- ARGV[2]  window (expiry) in seconds
-- ARGV[3]  increment (cost), default 1
-- Reply: {over_limit, count, ttl_s, max_requests}
local counter = KEYS[1]
local override = KEYS[2]
local max_requests = tonumber(ARGV[1])
local expiry = tonumber(ARGV[2])
local increment = tonumber(ARGV[3]) or 1

if override and override ~= '' then
  local fields = redis.call('HGETALL', override)
  for i = 1, #fields, 2 do
    local name, value = fields[i], tonumber(fields[i + 1])
    if name == 'max_requests' then
      max_requests = value
    elseif name == 'expiry' then
      expiry = value
    end
  end
end

local over_limit = 0
local count = tonumber(redis.call('GET', counter))
if count == nil then
  -- A new window: its first admitted call opens it.
  count = 0
  if increment > max_requests then
    over_limit = 1
  else
    redis.call('SET', counter, increment)
    redis.call('EXPIRE', counter, expiry)
    count = increment
  end
elseif count + increment > max_requests then
  over_limit = 1
else
  count = redis.call('INCRBY', counter, increment)
end
return {over_limit, count, redis.call('TTL', counter), max_requests}
