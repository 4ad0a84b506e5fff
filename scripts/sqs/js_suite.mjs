// The SQS endpoint through the AWS SDK for JavaScript v3 (pinned in
// scripts/sqs-sdks.sh), which checks every body's MD5 itself. Run by
// scripts/sqs-sdks.sh against a served broker: argv[2] is the endpoint; argv[3], if
// given, an administrator token of a broker with auth on, which signs every request.
import {
  SQSClient, CreateQueueCommand, GetQueueUrlCommand, ListQueuesCommand,
  DeleteQueueCommand, SendMessageCommand, SendMessageBatchCommand,
  ReceiveMessageCommand, DeleteMessageCommand, ChangeMessageVisibilityCommand,
  PurgeQueueCommand, GetQueueAttributesCommand, ListDeadLetterSourceQueuesCommand,
  StartMessageMoveTaskCommand,
} from "@aws-sdk/client-sqs";

const endpoint = process.argv[2];
const token = process.argv[3];
const client = (accessKeyId, secretAccessKey) => new SQSClient({
  endpoint, region: "us-east-1", credentials: { accessKeyId, secretAccessKey },
});
const sqs = token ? client("admin", token) : client("mqlite", "mqlite");
let checks = 0;
const check = (cond, what) => {
  if (!cond) { console.error("js suite: FAILED:", what); process.exit(1); }
  checks++;
};
const errorName = async (command, by = sqs) => {
  try { await by.send(command); } catch (e) { return e.name; }
  console.error("js suite: expected an error"); process.exit(1);
};

const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: "js-orders" }));
check(QueueUrl.endsWith("/js-orders"), QueueUrl);
check((await sqs.send(new GetQueueUrlCommand({ QueueName: "js-orders" }))).QueueUrl === QueueUrl, "url");
const listed = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: "js-" }));
check(listed.QueueUrls.includes(QueueUrl), listed);

// The SDK verifies MD5OfMessageBody on send and MD5OfBody on receive.
await sqs.send(new SendMessageCommand({
  QueueUrl, MessageBody: "hello from javascript ✓",
  MessageAttributes: { tenant: { DataType: "String", StringValue: "acme" } },
}));
const got = await sqs.send(new ReceiveMessageCommand({
  QueueUrl, MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["All"],
}));
check(got.Messages.length === 1 && got.Messages[0].Body === "hello from javascript ✓", got);
const m = got.Messages[0];
check(m.MessageAttributes.tenant.StringValue === "acme", m);
await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0 }));
const again = (await sqs.send(new ReceiveMessageCommand({ QueueUrl, MessageSystemAttributeNames: ["All"] }))).Messages[0];
check(again.Attributes.ApproximateReceiveCount === "2", again);
check(await errorName(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: m.ReceiptHandle })) === "InvalidParameterValue", "stale handle");
await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: again.ReceiptHandle }));

// A batch with a partial failure.
const batch = await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries: [
  { Id: "a", MessageBody: "one" }, { Id: "b", MessageBody: "two" }, { Id: "c", MessageBody: "bad \u0001" },
] }));
check(batch.Successful.length === 2 && batch.Failed[0].Id === "c" && batch.Failed[0].Code === "InvalidMessageContents", batch);
const two = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }));
check(two.Messages.length === 2, two);

// A long-poll woken by a send.
const poll = sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 10 }));
await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "wake" }));
check((await poll).Messages?.[0]?.Body === "wake", "woken by a send");

// A lease that lapses: a long-poll is woken when the message is visible again.
const { QueueUrl: short } = await sqs.send(new CreateQueueCommand({ QueueName: "js-short", Attributes: { VisibilityTimeout: "1" } }));
await sqs.send(new SendMessageCommand({ QueueUrl: short, MessageBody: "lapses" }));
await sqs.send(new ReceiveMessageCommand({ QueueUrl: short }));
const lapsed = await sqs.send(new ReceiveMessageCommand({ QueueUrl: short, WaitTimeSeconds: 10, MessageSystemAttributeNames: ["ApproximateReceiveCount"] }));
check(lapsed.Messages[0].Attributes.ApproximateReceiveCount === "2", lapsed);
await sqs.send(new DeleteQueueCommand({ QueueUrl: short }));

// FIFO: order per group across groups, deduplication inside the window.
const { QueueUrl: fifo } = await sqs.send(new CreateQueueCommand({ QueueName: "js-jobs.fifo", Attributes: { FifoQueue: "true" } }));
const ids = {};
for (const [group, n] of [["g1", 1], ["g2", 1], ["g1", 2], ["g2", 2], ["g1", 3]]) {
  const body = `${group}-${n}`;
  ids[body] = (await sqs.send(new SendMessageCommand({ QueueUrl: fifo, MessageBody: body, MessageGroupId: group, MessageDeduplicationId: body }))).MessageId;
}
const dup = await sqs.send(new SendMessageCommand({ QueueUrl: fifo, MessageBody: "g1-1", MessageGroupId: "g1", MessageDeduplicationId: "g1-1" }));
check(dup.MessageId === ids["g1-1"], "a repeat inside the window is the first message");
const order = [];
for (;;) {
  const got = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: fifo, MaxNumberOfMessages: 10 }))).Messages ?? [];
  if (got.length === 0) break;
  for (const m of got) {
    order.push(m.Body);
    await sqs.send(new DeleteMessageCommand({ QueueUrl: fifo, ReceiptHandle: m.ReceiptHandle }));
  }
}
for (const group of ["g1", "g2"]) {
  const mine = order.filter((b) => b.startsWith(group));
  check(JSON.stringify(mine) === JSON.stringify([...mine].sort()), `${group} in order: ${order}`);
}
check(order.length === 5, order);
await sqs.send(new DeleteQueueCommand({ QueueUrl: fifo }));

check(await errorName(new GetQueueUrlCommand({ QueueName: "no-such-queue" })) === "QueueDoesNotExist", "missing queue");

// Purge: every message goes.
await sqs.send(new PurgeQueueCommand({ QueueUrl }));
check((await sqs.send(new ReceiveMessageCommand({ QueueUrl }))).Messages === undefined, "purged");

// Dead-lettering at maxReceiveCount, and redrive back.
const { QueueUrl: dlq } = await sqs.send(new CreateQueueCommand({ QueueName: "js-dlq" }));
const dlqArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ["QueueArn"] }))).Attributes.QueueArn;
const { QueueUrl: src } = await sqs.send(new CreateQueueCommand({ QueueName: "js-src", Attributes: {
  RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 1 }) } }));
const sources = await sqs.send(new ListDeadLetterSourceQueuesCommand({ QueueUrl: dlq }));
check(sources.queueUrls.length === 1 && sources.queueUrls[0] === src, sources);
await sqs.send(new SendMessageCommand({ QueueUrl: src, MessageBody: "poison" }));
const once = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: src }))).Messages[0];
await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: src, ReceiptHandle: once.ReceiptHandle, VisibilityTimeout: 0 }));
check((await sqs.send(new ReceiveMessageCommand({ QueueUrl: src }))).Messages === undefined, "dead-lettered");
const dead = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq }))).Messages[0];
check(dead.Body === "poison", dead);
await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: dlq, ReceiptHandle: dead.ReceiptHandle, VisibilityTimeout: 0 }));
check((await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: dlqArn }))).TaskHandle, "move task");
check((await sqs.send(new ReceiveMessageCommand({ QueueUrl: src }))).Messages[0].Body === "poison", "redriven back");
await sqs.send(new DeleteQueueCommand({ QueueUrl: src }));
await sqs.send(new DeleteQueueCommand({ QueueUrl: dlq }));
await sqs.send(new DeleteQueueCommand({ QueueUrl }));
if (token) {
  check(await errorName(new ListQueuesCommand({}), client("admin", token + "x")) === "SignatureDoesNotMatch", "bad signature");
  // An mqlite access key signs with the SQS secret CreateKey answers; a listen-only
  // key is refused on send.
  const created = await fetch(`${endpoint}/mqlite.v1.AuthService/CreateKey`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
    body: JSON.stringify({ name: "js-listener", permissions: ["listen"] }),
  }).then((r) => r.json());
  const reader = client(created.id, created.sqs_secret_access_key);
  const { QueueUrl: keys } = await sqs.send(new CreateQueueCommand({ QueueName: "js-keys" }));
  check(await errorName(new SendMessageCommand({ QueueUrl: keys, MessageBody: "x" }), reader) === "AccessDenied", "listen-only key on send");
  check((await reader.send(new ReceiveMessageCommand({ QueueUrl: keys }))).Messages === undefined, "listen-only key receives");
  await sqs.send(new DeleteQueueCommand({ QueueUrl: keys }));
}
console.log(`@aws-sdk/client-sqs (${token ? "signed" : "auth off"}): ${checks} checks passed`);
