-- wrk_keys.lua - POSTs a small completion request, rotating the
-- Authorization key over WRK_KEYS (comma-separated "Bearer" keys), or the
-- body in WRK_BODY_FILE to WRK_PATH when set (the admission webhook).
-- WRK_DELAY_MS paces each connection (open-loop-ish: at most 1000/delay
-- requests per second per connection). done() prints one line:
--   RESULT requests duration_us non2xx socket_errors p50_us p99_us p999_us
local keys, reqs, n = {}, {}, 0
local delay_ms = tonumber(os.getenv("WRK_DELAY_MS") or "0")

init = function(args)
    local body = '{"prompt":"hello","max_tokens":1}'
    local bf = os.getenv("WRK_BODY_FILE")
    if bf and bf ~= "" then
        local f = assert(io.open(bf, "rb"))
        body = f:read("*a")
        f:close()
    end
    local path = os.getenv("WRK_PATH") or "/v1/completions"
    for k in string.gmatch(os.getenv("WRK_KEYS") or "none", "[^,]+") do
        keys[#keys + 1] = k
        reqs[#reqs + 1] = wrk.format("POST", path, {
            ["Authorization"] = "Bearer " .. k,
            ["Content-Type"] = "application/json",
        }, body)
    end
end

request = function()
    n = n % #reqs + 1
    return reqs[n]
end

if delay_ms > 0 then
    delay = function() return delay_ms end
end

done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format("RESULT %d %d %d %d %d %d %d\n", summary.requests, summary.duration,
        e.status, e.connect + e.read + e.write + e.timeout,
        latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
