// kafkajs against a secured strom listener, driven by tests/integration/test_security_clients.py.
//
//   node security.js COMMAND JSON_ARGS
//
// JSON_ARGS: {brokers: ["127.0.0.1:9093"], ssl: {ca, cert, key} (file paths, each optional) or
// absent, sasl: {mechanism: "plain" | "scram-sha-256" | "scram-sha-512", username, password} or
// absent, topic, n, groupId}. The last line of stdout is one JSON object: {result} or {error}.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [command, rawArgs] = process.argv.slice(2)
const args = JSON.parse(rawArgs || '{}')

function sslOptions(paths) {
  if (!paths) return undefined
  const ssl = {}
  if (paths.ca) ssl.ca = [fs.readFileSync(paths.ca, 'utf-8')]
  if (paths.cert) ssl.cert = fs.readFileSync(paths.cert, 'utf-8')
  if (paths.key) ssl.key = fs.readFileSync(paths.key, 'utf-8')
  return ssl
}

// Short timeouts and few retries: every step is on loopback, and a wrong password must
// surface at once rather than after kafkajs's default back-off.
const kafka = new Kafka({
  clientId: 'strom-security-test',
  brokers: args.brokers,
  ssl: sslOptions(args.ssl),
  sasl: args.sasl,
  logLevel: logLevel.NOTHING,
  connectionTimeout: 3000,
  authenticationTimeout: 3000,
  retry: { retries: args.retries === undefined ? 3 : args.retries, initialRetryTime: 100 },
})

// Produce `n` keyed records (key-<i>, value-<i>) with acks=all, then read them back with a
// consumer group from the beginning; the records read, in the order they came.
async function roundtrip({ topic, n, groupId, timeoutMs = 20000 }) {
  const producer = kafka.producer()
  await producer.connect()
  try {
    const messages = []
    for (let i = 0; i < n; i++) messages.push({ key: `key-${i}`, value: `value-${i}` })
    const results = await producer.send({ topic, acks: -1, messages })
    for (const r of results) if (r.errorCode !== 0) throw new Error(JSON.stringify(r))
  } finally {
    await producer.disconnect()
  }

  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })
  const records = []
  let done
  const finished = new Promise((resolve) => { done = resolve })
  const timer = setTimeout(done, timeoutMs)
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ message }) => {
        records.push([message.key.toString(), message.value.toString()])
        if (records.length >= n) done()
      },
    })
    await finished
  } finally {
    clearTimeout(timer)
    await consumer.disconnect()
  }
  return { records }
}

// What a client with a wrong password gets: how long connect() takes to fail and with what,
// for a producer (which then must not have sent anything) and for a consumer (which must
// not have read anything).
async function wrongPassword({ topic, groupId }) {
  const attempt = async (client, use) => {
    const t0 = process.hrtime.bigint()
    try {
      await client.connect()
      await use()
      return { ms: Number(process.hrtime.bigint() - t0) / 1e6, error: null }
    } catch (e) {
      return { ms: Number(process.hrtime.bigint() - t0) / 1e6, error: { name: e.name, message: e.message } }
    } finally {
      await client.disconnect().catch(() => {})
    }
  }
  const producer = kafka.producer()
  const produced = await attempt(producer, async () => {
    await producer.send({ topic, acks: -1, messages: [{ key: 'intruder', value: 'intruder' }] })
  })
  let consumed = 0
  const consumer = kafka.consumer({ groupId })
  const consuming = await attempt(consumer, async () => {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({ eachMessage: async () => { consumed += 1 } })
    await new Promise((resolve) => setTimeout(resolve, 2000))
  })
  return { producer: produced, consumer: { ...consuming, consumed } }
}

const commands = { roundtrip, wrongPassword }

// A command that hangs (a client retrying forever) ends with an error the test can show.
setTimeout(() => {
  process.stdout.write(JSON.stringify({ error: `${command} still running after ${args.deadlineMs || 30000} ms` }) + '\n')
  process.exit(2)
}, args.deadlineMs || 30000).unref()

commands[command](args).then(
  (result) => { process.stdout.write(JSON.stringify({ result }) + '\n') },
  (err) => {
    process.stdout.write(JSON.stringify({ error: String(err && err.stack || err) }) + '\n')
    process.exitCode = 1
  },
)
