// sdk_check.mjs - the official OpenAI Node SDK (npm "openai") against a
// real tenantd: node sdk_check.mjs BASE_URL. Prints one "ok - ..." or
// "not ok - ..." line per check (test_openai_sdk.sh counts them). Keys:
// key-sdk (no limits to speak of), key-tight (rate 20 per second, burst
// 20), key-poor (a day budget spent by its first request), key-lim
// (spec.models [llama-3-8b]).
import OpenAI from "openai";

const base = process.argv[2];
let pass = 0, fail = 0;
const ok = (m) => { pass++; console.log(`ok - ${m}`); };
const notOk = (m) => { fail++; console.log(`not ok - ${m}`); };
const check = (cond, m, detail) => (cond ? ok(m) : notOk(`${m}: ${detail ?? ""}`));

// a fetch that counts the attempts, when each was made and the
// retry-after-ms each answer carried
function counting() {
  const calls = [], retryMs = [];
  const f = async (url, init) => {
    calls.push(Date.now());
    const res = await fetch(url, init);
    retryMs.push(Number(res.headers.get("retry-after-ms") ?? NaN));
    return res;
  };
  return { calls, retryMs, fetch: f };
}
const client = (key, opts = {}) => new OpenAI({ apiKey: key, baseURL: `${base}/v1`, ...opts });
const chat = (model, maxTokens, extra = {}) => ({
  model,
  messages: [{ role: "user", content: "hi" }],
  max_tokens: maxTokens,
  ...extra,
});

async function main() {
  // non-streaming
  const sdk = client("key-sdk");
  const r = await sdk.chat.completions.create(chat("llama-3-8b", 5));
  check(r.choices?.[0]?.message?.content && r.usage?.completion_tokens === 5,
    "non-streaming: a completion with its usage", JSON.stringify(r));

  // streaming, with stream_options.include_usage
  const stream = await sdk.chat.completions.create(
    chat("llama-3-70b", 6, { stream: true, stream_options: { include_usage: true } }));
  let text = "", usage = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    text += c.choices?.[0]?.delta?.content ?? "";
    if (c.usage) usage = c.usage;
  }
  check(chunks > 1 && text.length > 0 && usage?.completion_tokens === 6,
    "streaming with include_usage: deltas, then the usage chunk", `${chunks} ${text} ${JSON.stringify(usage)}`);

  // /v1/models through the SDK: the tenant's models only
  const ids = [];
  for await (const m of client("key-lim").models.list()) ids.push(m.id);
  check(JSON.stringify(ids) === JSON.stringify(["llama-3-8b"]), "models.list(): the tenant's models",
    JSON.stringify(ids));

  // embeddings: the SDK asks for base64 by default and decodes the
  // little-endian float32 array; the values simmodel computes for input i,
  // component d (request.c's embedding_value), as float32
  const want = (i) => Array.from({ length: 8 }, (_, d) =>
    Math.fround(Math.round((((i * 7 + d * 13) % 17) / 17 - 0.5) * 1e4) / 1e4));
  const emb = await sdk.embeddings.create({ model: "llama-3-8b", input: ["one", "two"] });
  check(emb.data?.length === 2 && JSON.stringify(emb.data[1].embedding) === JSON.stringify(want(1)),
    "embeddings.create (base64 by default): the vectors simmodel sent",
    JSON.stringify(emb.data?.map((e) => e.embedding)));
  const embRaw = await sdk.embeddings.create({ model: "llama-3-8b", input: "one" }).asResponse();
  const rawBody = await embRaw.json();
  check(typeof rawBody.data?.[0]?.embedding === "string",
    "embeddings: what went over the wire was base64", JSON.stringify(rawBody.data?.[0]));
  const embF = await sdk.embeddings.create({ model: "llama-3-8b", input: "one", encoding_format: "float" });
  check(JSON.stringify(embF.data?.[0]?.embedding?.map(Math.fround)) === JSON.stringify(want(0)),
    "embeddings with encoding_format float: JSON numbers", JSON.stringify(embF.data?.[0]));

  // a 429 as RateLimitError with tenantd's message, code and type
  const tight0 = client("key-tight", { maxRetries: 0 });
  await tight0.chat.completions.create(chat("llama-3-8b", 10)); // 11 of its 20
  try {
    await tight0.chat.completions.create(chat("llama-3-8b", 10));
    notOk("the second request over the rate should be refused");
  } catch (e) {
    check(e instanceof OpenAI.RateLimitError && e.status === 429,
      "429 is a RateLimitError", `${e?.constructor?.name} ${e?.status}`);
    check(/rate limit reached for tenant tight; retry after \d+ ms/.test(e.message),
      "its message is tenantd's", e.message);
    check(e.code === "rate_limited" && e.type === "rate_limit_error" && e.param === null,
      "e.code and e.type are set", `${e.code} ${e.type} ${e.param}`);
    check(typeof e.error?.retry_after_ms === "number" && e.error?.tenant === "tight",
      "tenantd's fields are in e.error", JSON.stringify(e.error));
    const ms = Number(e.headers?.get("retry-after-ms"));
    check(ms > 0 && ms < 1000 && e.headers?.get("retry-after") === "1",
      "retry-after-ms below a second while Retry-After says 1", `${ms} ${e.headers?.get("retry-after")}`);
  }

  // retries honour retry-after-ms: wait for the refill, not a whole second
  await new Promise((res) => setTimeout(res, 1100));
  const cnt = counting();
  const tight = client("key-tight", { maxRetries: 2, fetch: cnt.fetch });
  await tight.chat.completions.create(chat("llama-3-8b", 10));
  const again = await tight.chat.completions.create(chat("llama-3-8b", 10));
  const waited = cnt.calls.length >= 3 ? cnt.calls[2] - cnt.calls[1] : -1;
  const asked = cnt.retryMs[1];
  check(again.choices?.length === 1 && cnt.calls.length === 3,
    "a 429 is retried and then served", `${cnt.calls.length} attempts`);
  // the wait starts when the answer arrives, after calls[1]: at least asked
  check(asked > 0 && asked < 1000 && waited >= asked && waited < 900,
    `the SDK waited retry-after-ms (asked ${asked} ms, waited ${waited} ms), not Retry-After's whole second`,
    `${asked} ${waited}`);

  // cost_exceeds_burst: x-should-retry: false, so one attempt only
  const cnt2 = counting();
  try {
    await client("key-tight", { maxRetries: 2, fetch: cnt2.fetch }).chat.completions.create(chat("llama-3-8b", 500));
    notOk("a request over the burst should be refused");
  } catch (e) {
    check(e instanceof OpenAI.RateLimitError && e.code === "cost_exceeds_burst" && cnt2.calls.length === 1,
      "cost_exceeds_burst is not retried", `${e.code} ${cnt2.calls.length} attempts`);
  }

  // budget_exceeded with a reset hours away: not retried, no day-long sleep
  const poor = client("key-poor", { maxRetries: 2 });
  await poor.chat.completions.create(chat("llama-3-8b", 50));
  const cnt3 = counting();
  const tb = Date.now();
  try {
    await client("key-poor", { maxRetries: 2, fetch: cnt3.fetch }).chat.completions.create(chat("llama-3-8b", 50));
    notOk("a request over the budget should be refused");
  } catch (e) {
    check(e instanceof OpenAI.RateLimitError && e.code === "budget_exceeded" && e.type === "insufficient_quota" &&
      cnt3.calls.length === 1 && Date.now() - tb < 2000,
      "budget_exceeded: insufficient_quota, not retried", `${e.code} ${e.type} ${cnt3.calls.length} attempts`);
  }

  // a model outside spec.models: PermissionDeniedError, not retried
  try {
    await client("key-lim", { maxRetries: 2 }).chat.completions.create(chat("llama-3-70b", 5));
    notOk("llama-3-70b should be refused to lim");
  } catch (e) {
    check(e instanceof OpenAI.PermissionDeniedError && e.code === "model_not_allowed" && e.param === "model",
      "a model outside spec.models is a PermissionDeniedError, code model_not_allowed", `${e?.constructor?.name} ${e.code}`);
  }
  // a model no route serves: NotFoundError
  try {
    await sdk.chat.completions.create(chat("gpt-nothing", 5));
    notOk("an unserved model should be refused");
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError && e.code === "model_not_found" &&
      e.message.includes("The model `gpt-nothing` does not exist"),
      "an unserved model is a NotFoundError, code model_not_found", `${e?.constructor?.name} ${e.code} ${e.message}`);
  }
  // an unknown key: AuthenticationError
  try {
    await client("key-wrong", { maxRetries: 0 }).models.list();
    notOk("a wrong key should be refused");
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError && e.code === "unauthorized",
      "a wrong key is an AuthenticationError", `${e?.constructor?.name} ${e.code}`);
  }
}

main()
  .catch((e) => notOk(`unexpected: ${e?.stack ?? e}`))
  .finally(() => {
    console.log(`${pass} passed, ${fail} failed`);
    process.exit(fail ? 1 : 0);
  });
