-- wrk script for bench/testbed_http.sh: sustained load on `longhaul testbed serve`.
--
--   wrk -t T -c C -d D --latency -s bench/testbed_http.lua URL -- MODE TOKENS T0 THREADS ARG
--
-- MODE      freebusy: GET /api/v1/freebusy for ARG (a resource) over the week from T0, length PT1H
--           book: POST /api/v1/bookings, every request a distinct slot that the policy allows, so
--             each should be 201: request g (numbered across threads) goes to user u = g mod U
--             (U = the number of tokens), on that user's own resource ARG..u (ARG followed by
--             u), its j = g div U-th slot of 15 min, from T0 + j * 2 h 15 min (the policy's
--             2 h gap between one user's bookings, 18.75 h a week against the 40 h quota, 960
--             slots within the 90-day horizon)
--           contended: POST /api/v1/bookings of one of 32 back-to-back 1 h slots from T0 on ARG,
--             picked at random, by a random user: the first request for each slot wins, the rest
--             are 409 conflict (or 422 when the policy's gap rule refuses a user's second win)
-- TOKENS    a file with one API token per line (user i's token on line i + 1)
-- T0        the first slot's start, Unix seconds (a whole hour in the future)
-- THREADS   wrk's -t, so request numbers do not collide across threads
--
-- At the end it prints one line, "RESULT key=value ...", with the request count, duration,
-- latency percentiles (microseconds, as wrk measures them: from sending a request to its response
-- on a connection that waits for it) and the count of each response status.

local threads = {}
local next_id = 0

function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end

local function iso(t)
   return os.date("!%Y-%m-%dT%H:%M:%SZ", t)
end

function init(args)
   mode, target = args[1], args[5]
   t0 = tonumber(args[3])
   nthreads = tonumber(args[4])
   tokens = {}
   for line in io.lines(args[2]) do
      if line ~= "" then
         table.insert(tokens, line)
      end
   end
   statuses = {}
   seq = 0
   math.randomseed(1000 + id)
   if mode == "freebusy" then
      wrk.method = "GET"
      wrk.path = string.format("/api/v1/freebusy?resource=%s&from=%s&to=%s&length=PT1H",
         target, iso(t0), iso(t0 + 7 * 86400))
      wrk.headers["Authorization"] = "Bearer " .. tokens[1]
   elseif mode ~= "book" and mode ~= "contended" then
      error("unknown mode " .. tostring(mode))
   end
end

local function post(user, resource, start, stop)
   local body = string.format('{"resource":"%s","start":"%s","end":"%s"}',
      resource, iso(start), iso(stop))
   return wrk.format("POST", "/api/v1/bookings", {
      ["Authorization"] = "Bearer " .. tokens[user + 1],
      ["Content-Type"] = "application/json",
   }, body)
end

function request()
   if mode == "freebusy" then
      return wrk.format()
   end
   local g = id + nthreads * seq
   seq = seq + 1
   if mode == "book" then
      local u = g % #tokens
      local j = math.floor(g / #tokens)
      local start = t0 + j * 8100
      return post(u, target .. u, start, start + 900)
   end
   local slot = math.random(0, 31)
   local start = t0 + slot * 3600
   return post(math.random(0, #tokens - 1), target, start, start + 3600)
end

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
   local total = {}
   for _, thread in ipairs(threads) do
      for status, n in pairs(thread:get("statuses")) do
         total[status] = (total[status] or 0) + n
      end
   end
   local parts = {}
   for status, n in pairs(total) do
      table.insert(parts, string.format("s%d=%d", status, n))
   end
   table.sort(parts)
   local e = summary.errors
   io.write(string.format(
      "RESULT requests=%d duration_us=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d " ..
      "connect_errors=%d read_errors=%d write_errors=%d timeouts=%d non2xx=%d %s\n",
      summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
      latency:percentile(99), latency.max, e.connect, e.read, e.write, e.timeout, e.status,
      table.concat(parts, " ")))
end
