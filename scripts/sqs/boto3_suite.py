"""The SQS endpoint through boto3 (pinned in scripts/sqs-sdks.sh): what a Python
program holding an SQS client sees. Run by scripts/sqs-sdks.sh against a served broker:
argv[1] is the endpoint; argv[2], if given, an administrator token of a broker with auth
on, which signs every request (Signature Version 4, key id `admin`)."""

import hashlib
import json
import sys
import threading
import urllib.request

import boto3
from botocore.exceptions import ClientError

endpoint = sys.argv[1]
token = sys.argv[2] if len(sys.argv) > 2 else None


def client(key_id, secret):
    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=key_id, aws_secret_access_key=secret)


sqs = client("admin", token) if token else client("mqlite", "mqlite")
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise SystemExit(f"boto3 suite: FAILED: {what}")
    checks += 1


def code(call, **kw):
    try:
        call(**kw)
    except ClientError as e:
        return e.response["Error"]["Code"]
    raise SystemExit(f"boto3 suite: {call.__name__} {kw} succeeded, expected an error")


# Queues: create (idempotent), get-url, list, delete.
url = sqs.create_queue(QueueName="py-orders")["QueueUrl"]
check(url.endswith("/py-orders"), url)
check(sqs.create_queue(QueueName="py-orders")["QueueUrl"] == url, "create is idempotent")
check(sqs.get_queue_url(QueueName="py-orders")["QueueUrl"] == url, "get_queue_url")
check(url in sqs.list_queues(QueueNamePrefix="py-")["QueueUrls"], "list_queues")
attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
check(attrs["VisibilityTimeout"] == "30", attrs)

# Send and receive with attributes; the digests are SQS's.
body = "hello from boto3"
sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes={
    "tenant": {"DataType": "String", "StringValue": "acme"},
    "n": {"DataType": "Number", "StringValue": "7"},
    "raw": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"},
})
check(sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest(), sent)
got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                          MessageSystemAttributeNames=["All"])["Messages"]
check(len(got) == 1 and got[0]["Body"] == body, got)
m = got[0]
check(m["MessageAttributes"]["raw"]["BinaryValue"] == b"\x00\x01\xff", m)
check(m["MessageAttributes"]["n"] == {"DataType": "Number", "StringValue": "7"}, m)
check(m["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"], m)
check(m["Attributes"]["ApproximateReceiveCount"] == "1", m)

# Visibility 0 gives it back; the old handle is then refused.
sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
again = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"][0]
check(again["MessageId"] == m["MessageId"], again)
check(again["Attributes"]["ApproximateReceiveCount"] == "2", again)
check(code(sqs.delete_message, QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
      == "InvalidParameterValue", "a stale handle is refused")
sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
check("Messages" not in sqs.receive_message(QueueUrl=url), "deleted")

# A lease that lapses: a long-poll is woken when the message is visible again.
short = sqs.create_queue(QueueName="py-short", Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
sqs.send_message(QueueUrl=short, MessageBody="lapses")
sqs.receive_message(QueueUrl=short)
lapsed = sqs.receive_message(QueueUrl=short, WaitTimeSeconds=10,
                             MessageSystemAttributeNames=["ApproximateReceiveCount"])["Messages"][0]
check(lapsed["Attributes"]["ApproximateReceiveCount"] == "2", lapsed)
sqs.delete_queue(QueueUrl=short)

# A batch with a partial failure.
batch = sqs.send_message_batch(QueueUrl=url, Entries=[
    {"Id": "a", "MessageBody": "one"},
    {"Id": "b", "MessageBody": "bad \x01"},
])
check([e["Id"] for e in batch["Successful"]] == ["a"], batch)
check(batch["Failed"][0]["Code"] == "InvalidMessageContents", batch)
one = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
    {"Id": "x", "ReceiptHandle": one[0]["ReceiptHandle"]}])
check([e["Id"] for e in deleted["Successful"]] == ["x"], deleted)

# A long-poll woken by a send.
result = {}
poll = threading.Thread(target=lambda: result.update(
    sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10)))
poll.start()
sqs.send_message(QueueUrl=url, MessageBody="wake")
poll.join(timeout=15)
check(result.get("Messages", [{}])[0].get("Body") == "wake", result)

# The SDK's exception classes come from the errors' shapes.
try:
    sqs.get_queue_url(QueueName="no-such-queue")
    raise SystemExit("boto3 suite: a missing queue was found")
except sqs.exceptions.QueueDoesNotExist as e:
    check(e.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue", e.response)

# Purge: every message of the queue goes, at once.
sqs.send_message(QueueUrl=url, MessageBody="to purge")
sqs.purge_queue(QueueUrl=url)
check("Messages" not in sqs.receive_message(QueueUrl=url), "purged")

# Dead-lettering at maxReceiveCount into the redrive policy's queue, and redrive back.
dlq = sqs.create_queue(QueueName="py-dlq")["QueueUrl"]
dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"})
src = sqs.create_queue(QueueName="py-src", Attributes={"RedrivePolicy": policy})["QueueUrl"]
check(sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [src], "dlq sources")
sqs.send_message(QueueUrl=src, MessageBody="poison")
for _ in range(2):
    m = sqs.receive_message(QueueUrl=src)["Messages"][0]
    sqs.change_message_visibility(QueueUrl=src, ReceiptHandle=m["ReceiptHandle"],
                                  VisibilityTimeout=0)
check("Messages" not in sqs.receive_message(QueueUrl=src), "dead-lettered at maxReceiveCount")
dead = sqs.receive_message(QueueUrl=dlq)["Messages"][0]
check(dead["Body"] == "poison", dead)
sqs.change_message_visibility(QueueUrl=dlq, ReceiptHandle=dead["ReceiptHandle"],
                              VisibilityTimeout=0)
check(sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"], "a move task")
back = sqs.receive_message(QueueUrl=src, MessageSystemAttributeNames=["All"])["Messages"][0]
check(back["Body"] == "poison" and back["Attributes"]["ApproximateReceiveCount"] == "1", back)
sqs.delete_queue(QueueUrl=src)
sqs.delete_queue(QueueUrl=dlq)
check(code(sqs.create_queue, QueueName="jobs.fifo") == "InvalidParameterValue",
      "a .fifo name needs FifoQueue")

# FIFO: order per group across groups, one in flight per group, deduplication.
fifo = sqs.create_queue(QueueName="py-jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
ids = {}
for group, n in [("g1", 1), ("g2", 1), ("g1", 2), ("g2", 2), ("g1", 3)]:
    body = f"{group}-{n}"
    ids[body] = sqs.send_message(QueueUrl=fifo, MessageBody=body, MessageGroupId=group,
                                 MessageDeduplicationId=body)["MessageId"]
dup = sqs.send_message(QueueUrl=fifo, MessageBody="g1-1", MessageGroupId="g1",
                       MessageDeduplicationId="g1-1")
check(dup["MessageId"] == ids["g1-1"], "a repeat inside the window is the first message")
order = []
while True:
    got = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10,
                              MessageSystemAttributeNames=["All"]).get("Messages", [])
    if not got:
        break
    check(len({m["Attributes"]["MessageGroupId"] for m in got}) == len(got),
          "one message per group in flight")
    for m in got:
        order.append(m["Body"])
        sqs.delete_message(QueueUrl=fifo, ReceiptHandle=m["ReceiptHandle"])
for group in ("g1", "g2"):
    mine = [b for b in order if b.startswith(group)]
    check(mine == sorted(mine), f"{group} in order: {order}")
check(len(order) == 5, order)
sqs.delete_queue(QueueUrl=fifo)

# Content-based deduplication: the body's SHA-256 names the message.
cbd = sqs.create_queue(QueueName="py-cbd.fifo", Attributes={
    "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
first = sqs.send_message(QueueUrl=cbd, MessageBody="same", MessageGroupId="g")
again = sqs.send_message(QueueUrl=cbd, MessageBody="same", MessageGroupId="g")
check(first["MessageId"] == again["MessageId"], "a repeated body is the first message")
sqs.delete_queue(QueueUrl=cbd)

sqs.delete_queue(QueueUrl=url)
check(code(sqs.get_queue_url, QueueName="py-orders")
      == "AWS.SimpleQueueService.NonExistentQueue", "deleted queue")
if token:
    # A wrong secret, and a key id that cannot sign, are refused.
    check(code(client("admin", token + "x").list_queues) == "SignatureDoesNotMatch",
          "a bad signature is refused")
    check(code(client("someone", token).list_queues) == "InvalidClientTokenId",
          "an unknown key id is refused")

    # mqlite's access keys sign with the SQS secret CreateKey answers; their
    # permissions apply per action, and a revoked key stops at once.
    def rpc(method, body):
        request = urllib.request.Request(
            f"{endpoint}/mqlite.v1.AuthService/{method}", data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request) as answer:
            return json.load(answer)

    keys = sqs.create_queue(QueueName="py-keys")["QueueUrl"]
    listener = rpc("CreateKey", {"name": "py-listener", "permissions": ["listen"]})
    secret = listener["sqs_secret_access_key"]
    check(len(secret) == 64, listener)
    reader = client(listener["id"], secret)
    check(code(reader.send_message, QueueUrl=keys, MessageBody="x") == "AccessDenied",
          "a listen-only key is refused on send")
    check("Messages" not in reader.receive_message(QueueUrl=keys), "a listen-only key receives")
    wrong = secret[:-1] + ("1" if secret[-1] == "0" else "0")
    check(code(client(listener["id"], wrong).receive_message, QueueUrl=keys)
          == "SignatureDoesNotMatch", "a key's wrong secret is refused")
    sender = rpc("CreateKey", {"name": "py-sender", "permissions": ["send"]})
    writer = client(sender["id"], sender["sqs_secret_access_key"])
    writer.send_message(QueueUrl=keys, MessageBody="from a key")
    check(reader.receive_message(QueueUrl=keys)["Messages"][0]["Body"] == "from a key",
          "a send-only key sends")
    rpc("RevokeKey", {"id": sender["id"]})
    check(code(writer.send_message, QueueUrl=keys, MessageBody="x") == "InvalidClientTokenId",
          "a revoked key is refused")
    sqs.delete_queue(QueueUrl=keys)
mode = "signed" if token else "auth off"
print(f"boto3 {boto3.__version__} ({mode}): {checks} checks passed")
