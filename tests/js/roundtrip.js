// kafkajs against strom, driven by tests/integration/test_kafkajs.py.
//
//   node roundtrip.js BOOTSTRAP COMMAND JSON_ARGS
//
// Every command prints one JSON object on its last line of stdout (records as JSON lines
// before it where a command consumes). Records follow tests/support/roundtrip.py: record i
// has key `key-<i % 997>`, value `value-<i>-<codec>-` + 60 dots, headers seq and codec, and
// timestamp BASE_TS + i.
'use strict'

const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const BASE_TS = 1700000000000
const PAD = '.'.repeat(60)
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

const [bootstrap, command, rawArgs] = process.argv.slice(2)
const args = JSON.parse(rawArgs || '{}')
const kafka = new Kafka({
  clientId: 'strom-kafkajs-test',
  brokers: bootstrap.split(','),
  logLevel: logLevel.ERROR,
  retry: { retries: 8 },
})

function record(i, codec) {
  return {
    key: `key-${i % 997}`,
    value: `value-${i}-${codec}-${PAD}`,
    headers: { seq: String(i), codec },
    timestamp: String(BASE_TS + i),
  }
}

function seen(partition, m) {
  const headers = Object.entries(m.headers || {}).map(([k, v]) => [k, v === null ? null : v.toString()])
  return {
    partition,
    offset: Number(m.offset),
    key: m.key === null ? null : m.key.toString(),
    value: m.value === null ? null : m.value.toString(),
    headers,
    timestamp: Number(m.timestamp),
  }
}

async function createTopic({ topic, partitions, replicationFactor = 1 }) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [{ topic, numPartitions: partitions, replicationFactor }],
      waitForLeaders: true,
    })
    const meta = await admin.fetchTopicMetadata({ topics: [topic] })
    return { created, partitions: meta.topics[0].partitions.length }
  } finally {
    await admin.disconnect()
  }
}

// With `partitions`, record i goes to partition (i % 997) % partitions (its key's partition
// stays fixed) and every send() carries one partition only: kafkajs 2.2.4 retries a send()
// only to brokers that have not answered it yet, so when a partition's leader moves to a
// broker that already answered for another partition, that partition's records are never
// sent and send() still succeeds (tulios/kafkajs#1798). With one partition per send() every
// retry goes to the partition's current leader.
async function produce({ topic, n, codec, chunk = 5000, idempotent = true, progress = false, partitions = 0 }) {
  const producer = kafka.producer({ idempotent, maxInFlightRequests: idempotent ? 1 : 5 })
  await producer.connect()
  let acked = 0
  const send = async (messages) => {
    const results = await producer.send({ topic, acks: -1, compression: CODECS[codec], messages })
    for (const r of results) if (r.errorCode !== 0) throw new Error(JSON.stringify(r))
  }
  try {
    for (let start = 0; start < n; start += chunk) {
      const messages = []
      for (let i = start; i < Math.min(n, start + chunk); i++) {
        const m = record(i, codec)
        if (partitions) m.partition = (i % 997) % partitions
        messages.push(m)
      }
      if (partitions) {
        for (let p = 0; p < partitions; p++) await send(messages.filter((m) => m.partition === p))
      } else {
        await send(messages)
      }
      acked += messages.length
      if (progress) process.stdout.write(JSON.stringify({ progress: acked }) + '\n')
    }
  } finally {
    await producer.disconnect()
  }
  return { acked }
}

// Consume as one member (or `members` members) of a group until `n` distinct records arrived,
// committing as kafkajs does by default; print each record as a JSON line.
async function consumeGroup({ topic, groupId, n, members = 1, timeoutMs = 90000 }) {
  const consumers = []
  const assigned = new Map()
  let count = 0
  let done
  const finished = new Promise((resolve) => { done = resolve })
  for (let m = 0; m < members; m++) {
    const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      assigned.set(m, e.payload.memberAssignment[topic] || [])
    })
    consumers.push(consumer)
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
  }
  const lines = []
  const distinct = new Set()     // a rebalance may hand a partition over: count each offset once
  await Promise.all(consumers.map((consumer, m) => consumer.run({
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      for (const message of batch.messages) {
        lines.push(JSON.stringify({ member: m, ...seen(batch.partition, message) }))
        resolveOffset(message.offset)
        distinct.add(`${batch.partition}:${message.offset}`)
      }
      count = distinct.size
      await heartbeat()
      if (count >= n) done()
    },
  })))
  const timer = setTimeout(done, timeoutMs)
  await finished
  clearTimeout(timer)
  for (const consumer of consumers) await consumer.disconnect()   // commits what was resolved
  for (const line of lines) process.stdout.write(line + '\n')
  return { consumed: count, assignments: Object.fromEntries(assigned) }
}

async function groupState({ topic, groupId }) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const committed = await admin.fetchOffsets({ groupId, topics: [topic] })
    const end = await admin.fetchTopicOffsets(topic)
    const groups = await admin.listGroups()
    const described = await admin.describeGroups([groupId])
    return {
      committed: committed[0].partitions.map((p) => [p.partition, Number(p.offset)]),
      end: end.map((p) => [p.partition, Number(p.high)]),
      listed: groups.groups.some((g) => g.groupId === groupId),
      state: described.groups[0].state,
      protocolType: described.groups[0].protocolType,
    }
  } finally {
    await admin.disconnect()
  }
}

const commands = { createTopic, produce, consumeGroup, groupState }

// A command that hangs (a client retrying forever) ends with an error the test can show.
setTimeout(() => {
  process.stdout.write(JSON.stringify({ error: `${command} still running after ${args.deadlineMs || 180000} ms` }) + '\n')
  process.exit(2)
}, args.deadlineMs || 180000).unref()

commands[command](args).then(
  (result) => { process.stdout.write(JSON.stringify({ result }) + '\n') },
  (err) => {
    process.stdout.write(JSON.stringify({ error: String(err && err.stack || err) }) + '\n')
    process.exitCode = 1
  },
)
