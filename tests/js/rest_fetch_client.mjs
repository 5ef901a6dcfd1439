// A REST proxy client in Node.js with nothing but the built-in fetch (Node 18+): it produces
// records through v2 (POST /topics/{topic}, binary: base64 keys and values), then consumes
// them through a v2 consumer instance (create, subscribe, read until all arrived, commit,
// delete). Driven by tests/integration/rest/test_rest_other_language.py.
//
//   node rest_fetch_client.mjs PROXY_URL TOPIC GROUP COUNT
//
// Prints one JSON line: {"produced": [{partition, offset}], "consumed": [{topic, key, value,
// partition, offset}] (keys and values decoded to text), "assignment": [{topic, partition}]},
// or {"error": "..."} and exits 1.

const [url, topic, group, countText] = process.argv.slice(2);
const count = Number(countText);
const V2 = "application/vnd.kafka.v2+json";
const BINARY = "application/vnd.kafka.binary.v2+json";

const b64 = (text) => Buffer.from(text, "utf8").toString("base64");
const unb64 = (data) => (data === null ? null : Buffer.from(data, "base64").toString("utf8"));

async function call(method, path, { body, contentType = V2, accept = V2, expect = 200 } = {}) {
  const headers = { Accept: accept };
  if (body !== undefined) headers["Content-Type"] = contentType;
  const response = await fetch(url + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30000),
  });
  const text = await response.text();
  if (response.status !== expect) {
    throw new Error(`${method} ${path}: ${response.status} ${text}`);
  }
  return text ? JSON.parse(text) : null;
}

async function main() {
  // Produce: one request with every record, keyed, through v2's binary embedded format.
  const records = [];
  for (let i = 0; i < count; i++) {
    records.push({ key: b64(`node-key-${i}`), value: b64(`node-value-${i} ✓`) });
  }
  const produced = await call("POST", `/topics/${topic}`, {
    body: { records },
    contentType: BINARY,
  });
  for (const o of produced.offsets) {
    if (o.error_code !== null && o.error_code !== undefined) {
      throw new Error(`produce failed: ${JSON.stringify(o)}`);
    }
  }

  // Consume through a v2 instance of the group.
  const created = await call("POST", `/consumers/${group}`, {
    body: { name: "node", format: "binary", "auto.offset.reset": "earliest",
            "auto.commit.enable": "false", "fetch.min.bytes": 1 },
  });
  const base = new URL(created.base_uri).pathname;
  await call("POST", `${base}/subscription`, { body: { topics: [topic] }, expect: 204 });
  const consumed = [];
  const deadline = Date.now() + 30000;
  while (consumed.length < count && Date.now() < deadline) {
    const batch = await call("GET", `${base}/records?timeout=1000`, { accept: BINARY });
    for (const r of batch) {
      consumed.push({ ...r, key: unb64(r.key), value: unb64(r.value) });
    }
  }
  await call("POST", `${base}/offsets`, { expect: 200 });      // commit what was read
  // GET .../offsets takes a body, which fetch() refuses on a GET: ask the assignment instead
  // and leave reading the committed offsets to the test.
  const assignment = await call("GET", `${base}/assignments`);
  await call("DELETE", base, { expect: 204 });
  console.log(JSON.stringify({
    produced: produced.offsets.map((o) => ({ partition: o.partition, offset: o.offset })),
    consumed,
    assignment: assignment.partitions,
  }));
}

main().catch((e) => {
  console.log(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }));
  process.exit(1);
});
